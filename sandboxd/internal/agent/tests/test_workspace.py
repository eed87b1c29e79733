"""The workspace in the checkpoint: files sent once, written back on a
restore, and named when over the cap."""

import os
import unittest

from agenthost import Agent

MiB = 1 << 20


class WorkspaceTest(unittest.TestCase):
    def setUp(self):
        self.a = Agent()
        self.addCleanup(self.a.close)
        self.store = {}

    def checkpointed(self, code, workspace=64 * MiB):
        r = self.a.exec(code, checkpoint=1 << 30, workspace=workspace)
        self.assertTrue(r.ok, r)
        manifest, chunks, error, _ = self.a.wait_checkpoint(r.done["id"])
        self.assertEqual(error, "")
        self.a.ack_checkpoint(r.done["id"])
        self.store.update(chunks)
        return manifest, chunks

    def restored(self, manifest):
        fresh = Agent()
        self.addCleanup(fresh.close)
        return fresh, fresh.restore(manifest, dict(self.store))

    def test_files_come_back_with_their_content_mode_and_mtime(self):
        manifest, _ = self.checkpointed(
            "import os\nos.makedirs('out/sub', exist_ok=True)\nos.makedirs('empty')\n"
            "open('keep.txt', 'w').write('kept')\nopen('out/sub/data.bin', 'wb').write(bytes(range(256)) * 100)\n"
            "os.chmod('keep.txt', 0o640)\nos.utime('keep.txt', ns=(1_000_000_000, 1_000_000_000))\n"
            "os.symlink('keep.txt', 'link')\nx = 1")
        self.assertEqual(sorted(manifest["workspace"]["files"]), ["keep.txt", "out/sub/data.bin"])
        fresh, report = self.restored(manifest)
        self.assertEqual(report["failed"], [])
        self.assertEqual(sorted(report["files"]), ["/workspace/keep.txt", "/workspace/link", "/workspace/out/sub/data.bin"])
        self.assertIn("x", report["restored"])
        with open(os.path.join(fresh.cwd, "keep.txt")) as f:
            self.assertEqual(f.read(), "kept")
        st = os.stat(os.path.join(fresh.cwd, "keep.txt"))
        self.assertEqual((st.st_mode & 0o777, st.st_mtime_ns), (0o640, 1_000_000_000))
        with open(os.path.join(fresh.cwd, "out/sub/data.bin"), "rb") as f:
            self.assertEqual(f.read(), bytes(range(256)) * 100)
        self.assertTrue(os.path.isdir(os.path.join(fresh.cwd, "empty")))
        self.assertEqual(os.readlink(os.path.join(fresh.cwd, "link")), "keep.txt")
        # The restored agent sends none of them again.
        r = fresh.exec("y = 2", checkpoint=1 << 30, workspace=64 * MiB)
        _, chunks, _, _ = fresh.wait_checkpoint(r.done["id"])
        self.assertEqual(len(chunks), 1, "only y's pickle")

    def test_only_the_changed_file_is_sent(self):
        _, chunks = self.checkpointed(
            "import os\nos.makedirs('big', exist_ok=True)\n"
            "for i in range(5):\n    open('big/%d.bin' % i, 'wb').write(os.urandom(MiB))\ndel i\n"
            "open('small.txt', 'w').write('a')".replace("MiB", str(MiB)))
        self.assertEqual(sum(len(c) for c in chunks.values()), 5 * MiB + 1)
        _, chunks = self.checkpointed("open('small.txt', 'w').write('b')")
        self.assertEqual([len(c) for c in chunks.values()], [1])
        _, chunks = self.checkpointed("pass")
        self.assertEqual(chunks, {})

    def test_an_append_to_a_large_file_sends_its_last_piece(self):
        self.checkpointed("import os\nopen('log', 'wb').write(os.urandom(9 * %d))" % MiB)
        _, chunks = self.checkpointed("open('log', 'ab').write(b'more')")
        self.assertEqual([len(c) for c in chunks.values()], [MiB + 4])

    def test_files_over_the_cap_are_named_not_kept(self):
        manifest, _ = self.checkpointed(
            "import os\nopen('small', 'wb').write(b'x' * 1000)\nopen('huge', 'wb').write(os.urandom(3 * %d))" % MiB,
            workspace=2 * MiB)
        self.assertEqual(list(manifest["workspace"]["files"]), ["small"])
        lost = [u for u in manifest["unsaved"] if u["name"] == "/workspace/huge"]
        self.assertEqual(len(lost), 1, manifest["unsaved"])
        self.assertIn("checkpoint cap", lost[0]["why"])
        self.assertEqual(lost[0]["type"], "file of 3.0 MiB")
        _, report = self.restored(manifest)
        self.assertEqual(report["files"], ["/workspace/small"])
        self.assertIn("/workspace/huge", [u["name"] for u in report["unsaved"]])

    def test_without_a_workspace_cap_no_files_are_kept(self):
        manifest, _ = self.checkpointed("open('f', 'w').write('x')", workspace=0)
        self.assertNotIn("workspace", manifest)

    def test_a_path_outside_the_workspace_is_refused(self):
        manifest, _ = self.checkpointed("open('f', 'w').write('x')")
        manifest["workspace"]["files"]["../escape"] = manifest["workspace"]["files"]["f"]
        fresh, report = self.restored(manifest)
        self.assertIn({"name": "/workspace/../escape", "why": "not a path inside the workspace"}, report["failed"])
        self.assertFalse(os.path.exists(os.path.join(os.path.dirname(fresh.cwd), "escape")))



class OutFilesTest(unittest.TestCase):
    def setUp(self):
        self.a = Agent()
        self.addCleanup(self.a.close)

    def test_files_made_or_changed_under_out_are_named_once(self):
        r = self.a.exec("import os\nos.makedirs('out/sub')\nopen('out/a.csv', 'w').write('x,y')\n"
                        "open('out/sub/b.png', 'wb').write(b'png')\nopen('not-out.txt', 'w').write('z')")
        self.assertEqual(r.done["files"], [{"path": "out/a.csv", "bytes": 3, "mime": "text/csv"},
                                           {"path": "out/sub/b.png", "bytes": 3, "mime": "image/png"}])
        r = self.a.exec("x = 1")
        self.assertNotIn("files", r.done)
        r = self.a.exec("open('out/a.csv', 'a').write(',z')")
        self.assertEqual(r.done["files"], [{"path": "out/a.csv", "bytes": 5, "mime": "text/csv"}])

    def test_at_most_twenty_are_named(self):
        r = self.a.exec("import os\nos.makedirs('out')\nfor i in range(25):\n    open('out/%02d.txt' % i, 'w').write('x')")
        self.assertEqual(len(r.done["files"]), 20)
        self.assertEqual(r.done["files_more"], 5)

    def test_restored_files_are_not_named_as_new(self):
        r = self.a.exec("import os\nos.makedirs('out')\nopen('out/a.txt', 'w').write('a')", checkpoint=1 << 30,
                        workspace=1 << 20)
        manifest, chunks, _, _ = self.a.wait_checkpoint(r.done["id"])
        fresh = Agent()
        self.addCleanup(fresh.close)
        fresh.restore(manifest, chunks)
        self.assertNotIn("files", fresh.exec("x = 1").done)


if __name__ == "__main__":
    unittest.main()
