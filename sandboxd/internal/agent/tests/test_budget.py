"""The output budget: head and tail sent, the whole stream in a file."""

import os
import re
import unittest

from agenthost import Agent

MARKER = re.compile(r"\n\[… ([\d,]+) characters of (stdout|stderr) left out: (.*) …\]\n")


class BudgetTest(unittest.TestCase):
    def setUp(self):
        self.a = Agent()

    def tearDown(self):
        self.a.close()

    def test_within_budget_is_untouched_and_writes_no_file(self):
        r = self.a.exec("print('x' * 100)", budget=1000)
        self.assertEqual(r.stdout, "x" * 100 + "\n")
        self.assertFalse(os.path.exists(os.path.join(self.a.cwd, ".codeexec")))

    def test_ten_megabytes_keep_head_and_tail_and_the_whole_in_a_file(self):
        code = ("for i in range(1_000_000):\n"
                "    print('line %07d' % i)\n"
                "print('answer=42')")
        r = self.a.exec(code, budget=40000, timeout=120)
        self.assertTrue(r.ok, r)
        self.assertLessEqual(len(r.stdout), 40000 + 300)
        self.assertTrue(r.stdout.startswith("line 0000000\n"))
        self.assertTrue(r.stdout.endswith("answer=42\n"), r.stdout[-200:])
        m = MARKER.search(r.stdout)
        self.assertIsNotNone(m, r.stdout[19000:21000])
        total = 13 * 1_000_000 + len("answer=42\n")
        sent = len(r.stdout) - len(m.group(0))
        self.assertEqual(int(m.group(1).replace(",", "")), total - sent)
        path = re.search(r"is in (/workspace/\S+);", m.group(3)).group(1)
        local = os.path.join(self.a.cwd, path[len("/workspace/"):])
        with open(local, "rb") as f:
            whole = f.read()
        self.assertEqual(len(whole), total)
        self.assertTrue(whole.endswith(b"line 0999999\nanswer=42\n"))
        self.assertEqual(r.dropped, {"stdout": 0, "stderr": 0})
        # The next call can read it (at its path relative to the workspace).
        r = self.a.exec("len(open(%r).read().splitlines())" % path[len("/workspace/"):])
        self.assertEqual(r.stdout, "1000001\n")

    def test_both_streams_share_the_budget(self):
        r = self.a.exec("import sys\nprint('o' * 5000)\nprint('e' * 5000, file=sys.stderr)", budget=4000)
        self.assertLessEqual(len(r.stdout) + len(r.stderr), 4000 + 2 * 300)
        self.assertIsNotNone(MARKER.search(r.stdout))
        self.assertIsNotNone(MARKER.search(r.stderr))
        self.assertTrue(r.stderr.endswith("e\n"))

    def test_only_the_last_calls_files_are_kept(self):
        for _ in range(5):
            self.a.exec("print('x' * 3000)", budget=1000)
        names = os.listdir(os.path.join(self.a.cwd, ".codeexec", "output"))
        self.assertEqual(len(names), 3, names)

    def test_a_file_that_cannot_be_written_is_said(self):
        os.makedirs(os.path.join(self.a.cwd, ".codeexec"))
        with open(os.path.join(self.a.cwd, ".codeexec", "output"), "w") as f:
            f.write("in the way")
        r = self.a.exec("print('x' * 3000)", budget=1000)
        m = MARKER.search(r.stdout)
        self.assertIn("it could not be kept in a file", m.group(3))

    def test_without_a_budget_the_cap_applies(self):
        r = self.a.exec("print('x' * 3000)", limit=100)
        self.assertEqual(len(r.stdout), 100)
        self.assertEqual(r.dropped["stdout"], 2901)


if __name__ == "__main__":
    unittest.main()
