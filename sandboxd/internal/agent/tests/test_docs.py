"""The examples in the README, docs/ and the sandbox's manual await the
helpers that are coroutines, and the manual gives the memory helpers'
signatures as they are."""

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


    def test_manual_gives_the_memory_helpers_signatures(self):
        # save_memory's metadata and load_memory's default are keyword-only,
        # as upstream's are: the manual said load_memory(key, default=None),
        # and load_memory("k", 5) raised TypeError.
        a = Agent()
        try:
            r = a.exec("import inspect\n"
                       "for n in ('save_memory', 'load_memory', 'update_memory', 'delete_memory', 'list_memories', 'memory_exists', 'get_memory_info'):\n"
                       "    print(n + str(inspect.signature(getattr(runtime, n))))\n"
                       "print(runtime.capability_summary())\n")
        finally:
            a.close()
        self.assertTrue(r.ok, r)
        lines = r.stdout.splitlines()
        signatures, manual = lines[:7], "\n".join(lines[7:])
        self.assertIn("load_memory(key, *, default=None)", signatures)
        for sig in signatures:
            name = sig.split("(")[0]
            shown = re.findall(r"\b%s\([^)]*\)" % name, manual)
            for s in shown:
                self.assertEqual(s, sig, "the manual shows %s; the helper is %s" % (s, sig))


if __name__ == "__main__":
    unittest.main()
