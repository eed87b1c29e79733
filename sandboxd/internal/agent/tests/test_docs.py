"""The examples in the README, docs/ and the sandbox's manual await the
helpers that are coroutines."""

import glob
import os
import re
import unittest

from agenthost import AGENT_DIR, Agent

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(AGENT_DIR)))  # sandboxd/internal/agent -> the repository


class DocsAwaitTest(unittest.TestCase):
    def test_async_helpers_are_awaited(self):
        a = Agent()
        try:
            r = a.exec("import inspect\n"
                       "print(' '.join(n for n in runtime.__all__ if inspect.iscoroutinefunction(getattr(runtime, n))))\n"
                       "print(runtime.capability_summary())\n")
        finally:
            a.close()
        self.assertTrue(r.ok, r)
        first, manual = r.stdout.split("\n", 1)
        coroutines = first.split()
        self.assertIn("search_tool_docs", coroutines)  # the list is the runtime's own
        call = re.compile(r"(await\s+)?\bruntime\.(%s)\(" % "|".join(map(re.escape, coroutines)))
        files = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
        missing = ["capability_summary(): " + line.strip()
                   for line in manual.splitlines() for m in call.finditer(line) if not m.group(1)]
        for path in files:
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    missing += ["%s:%d: %s" % (os.path.relpath(path, ROOT), n, line.strip())
                                for m in call.finditer(line) if not m.group(1)]
        self.assertEqual(missing, [], "a call of a coroutine without await returns the coroutine, not its result")


if __name__ == "__main__":
    unittest.main()
