"""The fork server's heap preparation (codeexec_forkheap.py): what a
forked child writes to the pages it shares with its parent.

Each case runs in a new interpreter that prepares its heap, forks, and
has the child report, from /proc/self/pagemap, which pages it had to
copy. The same case without the preparation shows the test can fail.
"""

import os
import subprocess
import sys
import textwrap
import unittest

FORKSERVER = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "engine", "forkserver"))
sys.path.insert(0, FORKSERVER)
import codeexec_forkheap as heap  # noqa: E402

sys.path.remove(FORKSERVER)

# The child's report: of the pages holding the parent's objects that it
# referenced, how many it holds alone (copied); of the objects it made,
# how many lie on pages that held the parent's objects.
CASE = textwrap.dedent("""
    import gc, os, struct, sys
    sys.path.insert(0, sys.argv[1])
    import codeexec_forkheap as heap
    PAGE = os.sysconf("SC_PAGE_SIZE")
    objs = [(i, str(i)) for i in range(20000)]  # tracked tuples, and strings
    # Holes among the parent's objects, as imports leave them.
    kept = [object() for _ in range(20000)] + [(i, -i) for i in range(20000)]
    del kept[::2]
    gc.collect()
    if "immortalize" in sys.argv[2:]:
        heap.immortalize()
    filler = heap.fill_pools() if "fill" in sys.argv[2:] else []
    gc.freeze()
    parent_pages = {id(o) // PAGE for o in gc.get_objects() + objs + kept}

    def exclusive(page):
        with open("/proc/self/pagemap", "rb") as f:
            f.seek(page * 8)
            e = struct.unpack("<Q", f.read(8))[0]
        return bool(e >> 63 & 1) and bool(e >> 56 & 1)

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        held = list(objs)  # a reference to each tuple: its count, written or not
        made = [object() for _ in range(5000)] + [(i, -i) for i in range(5000)]
        pages = {id(o) // PAGE for o in objs}
        copied = sum(exclusive(p) for p in pages)
        landed = sum(id(o) // PAGE in parent_pages for o in made)
        os.write(w, b"%d %d %d" % (copied, len(pages), landed))
        os._exit(0)
    os.close(w)
    print(os.read(r, 100).decode())
    os.waitpid(pid, 0)
""")


def run_case(*prepare):
    out = subprocess.run([sys.executable, "-I", "-c", CASE, FORKSERVER, *prepare],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise AssertionError(out.stderr)
    copied, pages, landed = (int(x) for x in out.stdout.split())
    return copied, pages, landed


class ImmortalizeTest(unittest.TestCase):
    @unittest.skipUnless(heap.supported(), "immortal objects need CPython 3.12+ (PEP 683); this is %s" % sys.version.split()[0])
    def test_child_leaves_immortal_objects_shared(self):
        copied, pages, _ = run_case()
        self.assertGreater(copied, pages * 0.9, "without immortalize the child's references copy the pages")
        copied, pages, _ = run_case("immortalize")
        self.assertLess(copied, pages * 0.1, "%d of %d pages copied" % (copied, pages))

    @unittest.skipIf(heap.supported(), "this interpreter has immortal objects")
    def test_unsupported_interpreter_changes_nothing(self):
        copied, pages, _ = run_case("immortalize")
        self.assertGreater(copied, pages * 0.9, "immortalize changed something on %s" % sys.version.split()[0])
        self.assertEqual(heap.immortalize(), 0)


class FillPoolsTest(unittest.TestCase):
    def test_free_blocks_reads_the_report(self):
        free = heap.free_blocks()
        self.assertTrue(free, "sys._debugmallocstats gave no size classes")
        self.assertTrue(all(size % 16 == 0 and n >= 0 for size, n in free.items()), free)

    def test_child_objects_start_pools_of_their_own(self):
        _, _, landed = run_case()
        self.assertGreater(landed, 5000, "without filling, new objects reuse the parent's free slots")
        _, _, landed = run_case("fill")
        self.assertLess(landed, 100, "%d of 10000 new objects landed on the parent's pages" % landed)


if __name__ == "__main__":
    unittest.main()
