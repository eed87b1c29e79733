"""Durable sessions through the real agent: checkpoint frames after an
exec, and a restore into a fresh agent, over the channel."""

import os
import tempfile
import unittest

from agenthost import Agent, server

FS = server("filesystem", ["read_file"])


class DurableTest(unittest.TestCase):
    def setUp(self):
        self.a = Agent()
        self.addCleanup(self.a.close)

    def checkpointed(self, code, cap=1 << 30, ack=True, servers=()):
        r = self.a.exec(code, checkpoint=cap, servers=servers)
        self.assertTrue(r.ok, r)
        manifest, chunks, error, frames = self.a.wait_checkpoint(r.done["id"])
        if ack and not error:
            self.a.ack_checkpoint(r.done["id"])
        return manifest, chunks, error

    def test_a_session_comes_back_in_a_new_sandbox(self):
        # The test keeps the chunks as sandboxd's store does: each
        # checkpoint sends only what the store lacks.
        store = {}
        _, chunks, _ = self.checkpointed("import math\nx = 41\ndef inc(v):\n    return v + 1\n")
        store.update(chunks)
        manifest, chunks, error = self.checkpointed(
            "class Box:\n    def __init__(self, v):\n        self.v = v\nb = Box(inc(x))\n")
        store.update(chunks)
        self.assertEqual(error, "")
        fresh = Agent()
        self.addCleanup(fresh.close)
        wanted = {v["chunk"] for v in manifest["values"].values()}
        report = fresh.restore(manifest, {k: v for k, v in store.items() if k in wanted})
        self.assertEqual(report["failed"], [])
        self.assertEqual(sorted(report["restored"]), ["Box", "b", "inc", "math", "x"])
        r = fresh.exec("print(b.v, inc(b.v), round(math.pi, 2), type(b).__name__)")
        self.assertEqual(r.stdout, "42 43 3.14 Box\n", r)
        # The restored session checkpoints again, sending nothing it got back.
        r = fresh.exec("b.v += 1", checkpoint=1 << 30)
        again, sent, _, _ = fresh.wait_checkpoint(r.done["id"])
        self.assertEqual(set(again["values"]), {"x", "b"})
        self.assertEqual(list(sent), [again["values"]["b"]["chunk"]], "only b changed")

    def test_user_tools_come_back_from_the_tools_the_restore_carried(self):
        # A checkpoint holding user_tools (the module, and a function taken
        # from it) rebuilds the module in the new sandbox: from the saved
        # tools the restore frame carried, else by asking with tool.list.
        double = {"name": "double", "docstring": "", "source": "def double(x):\n    return 2 * x\n"}
        self.a.host.tools["double"] = double
        manifest, chunks, error = self.checkpointed(
            "import user_tools\nut = user_tools\nfrom user_tools import double as dbl\n")
        self.assertEqual(error, "")
        for sent, asked in (([double], []), (None, ["tool.list"])):
            with self.subTest(sent=sent is not None):
                fresh = Agent()
                self.addCleanup(fresh.close)
                fresh.host.tools["double"] = double
                report = fresh.restore(manifest, chunks, saved_tools=sent)
                self.assertEqual(report["failed"], [])
                self.assertEqual(sorted(report["restored"]), ["dbl", "user_tools", "ut"])
                self.assertEqual([c["m"] for c in fresh.calls], asked)
                # The first exec's own list does not build the module again.
                r = fresh.exec("print(ut.double(2), dbl(3), double(4))", first=True, saved_tools=[double])
                self.assertEqual((r.stdout, r.calls), ("4 6 8\n", []), r)
                # The list served that build only: a later build asks.
                r = fresh.exec("import sys\ndel sys.modules['user_tools']\nimport user_tools\nprint(user_tools.__all__)")
                self.assertEqual((r.stdout, [c["m"] for c in r.calls]), ("['double']\n", ["tool.list"]), r)

    def test_a_saved_tool_not_used_yet_comes_back(self):
        # A bare name bound to a saved tool not used yet (loaded on first
        # use) is not checkpointed, as a loaded one is not; a name the
        # code gave it is, and comes back as the tool, loaded.
        double = {"name": "double", "docstring": "", "source": "def double(x):\n    return 2 * x\n"}
        self.a.host.tools["double"] = double
        r = self.a.exec("pass", first=True, saved_tools=[double])
        self.assertTrue(r.ok, r)
        manifest, chunks, error = self.checkpointed("twice = double\n")
        self.assertEqual((error, sorted(manifest["values"])), ("", ["twice"]))
        fresh = Agent()
        self.addCleanup(fresh.close)
        fresh.host.tools["double"] = double
        report = fresh.restore(manifest, chunks, saved_tools=[double])
        self.assertEqual((report["failed"], report["restored"]), ([], ["twice"]))
        r = fresh.exec("print(twice(4), type(twice).__name__)", first=True, saved_tools=[double])
        self.assertEqual(r.stdout, "8 function\n", r)

    def test_a_late_answer_confirms_its_own_checkpoint(self):
        # sandboxd answers a checkpoint after the next exec may have begun:
        # the answer must confirm the manifest it is about, not the next.
        _, first, _ = self.checkpointed("a = bytes(1 << 16)\nn = 1\n", ack=False)
        _, second, _ = self.checkpointed("b = bytes(1 << 17)\n", ack=False)
        self.assertEqual(len(first), 2)
        self.assertEqual(len(second), 3, "nothing confirmed yet: a, n and b")
        self.a.ack_checkpoint(self.a._next - 1)  # the first: a and n are stored
        _, third, _ = self.checkpointed("n = 2\n", ack=False)
        self.assertEqual(len(third), 2, "b (its checkpoint not confirmed) and n")
        self.a.ack_checkpoint(self.a._next - 1, ok=False)  # the second failed
        self.a.ack_checkpoint(self.a._next)  # the third: a, n=2 and b are stored
        _, fourth, _ = self.checkpointed("n = 3\n")
        self.assertEqual(len(fourth), 1, "only n changed")

    def test_a_value_back_to_an_old_one_is_sent_while_a_checkpoint_is_pending(self):
        # x's first chunk is stored; the next checkpoint (not yet confirmed)
        # names another, so storing it will delete the first. A value equal
        # to the first again must not count on it being there.
        _, first, _ = self.checkpointed("x = 'a' * 1000\n")
        _, second, _ = self.checkpointed("x = 'b' * 1000\n", ack=False)
        _, third, _ = self.checkpointed("x = 'a' * 1000\n", ack=False)
        self.assertEqual(len(second), 1)
        self.assertEqual(list(third), list(first), "the first chunk again, sent whole")

    def test_only_changed_names_are_sent_once_confirmed(self):
        _, first, _ = self.checkpointed("big = bytes(1 << 20)\nn = 1\n")
        _, second, _ = self.checkpointed("n = 2\n")
        self.assertEqual(len(first), 2)
        self.assertEqual(len(second), 1, "only n changed")
        # Not confirmed: the next checkpoint cannot rely on what was sent.
        _, third, _ = self.checkpointed("n = 3\n", ack=False)
        _, fourth, _ = self.checkpointed("n = 4\n")
        self.assertEqual(len(third), 1)
        self.assertEqual(len(fourth), 1)

    def test_large_chunks_are_split_over_frames(self):
        r = self.a.exec("import os\na = os.urandom(20 << 20)\nb = os.urandom(20 << 20)\n", checkpoint=1 << 30)
        manifest, chunks, error, frames = self.a.wait_checkpoint(r.done["id"])
        self.assertEqual(error, "")
        self.assertGreaterEqual(frames, 2)
        self.assertEqual(len(chunks), 2)

    def test_a_state_over_the_cap_is_not_durable(self):
        _, _, error = self.checkpointed("s = 'x' * 300000\n", cap=100000)
        self.assertIn("over the 97.7 KiB checkpoint limit (largest: s", error)

    def test_the_agents_own_names_are_not_saved(self):
        manifest, _, _ = self.checkpointed("mine = 1\n", servers=[FS])
        names = set(manifest["values"]) | {d["name"] for d in manifest["defs"]} | {m[0] for m in manifest["modules"]}
        self.assertEqual(names, {"mine"})

    def test_restore_runs_no_cell_code(self):
        marker = os.path.join(tempfile.mkdtemp(), "ran")
        manifest, chunks, _ = self.checkpointed(
            "with open(%r, 'a') as f:\n    f.write('ran\\n')\ndef f():\n    return 'kept'\n" % marker)
        fresh = Agent()
        self.addCleanup(fresh.close)
        report = fresh.restore(manifest, chunks)
        self.assertEqual(report["failed"], [])
        with open(marker) as f:
            self.assertEqual(f.read(), "ran\n")
        self.assertEqual(fresh.exec("print(f())").stdout, "kept\n")


if __name__ == "__main__":
    unittest.main()
