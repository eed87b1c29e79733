"""Checkpoints of a session's namespace, saved in one interpreter and
restored in a fresh one, as a sandbox after a crash would be."""

import json
import os
import subprocess
import tempfile
import unittest

from agenthost import PYTHON

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ckpt_driver.py")


class CheckpointTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.path = os.path.join(self.dir.name, "ckpt.json")

    def save(self, cells, cap=None, value_cap=None):
        args = [PYTHON, "-I", "-B", DRIVER, "save", self.path] + ([str(cap or 1 << 30)] if cap or value_cap else [])
        args += [str(value_cap)] if value_cap else []
        p = subprocess.run(args, input=json.dumps(cells), capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.path) as f:
            return json.load(f)

    def restore(self, probe=""):
        p = subprocess.run([PYTHON, "-I", "-B", DRIVER, "restore", self.path], input=probe,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        first, _, rest = p.stdout.partition("\n")
        return json.loads(first), rest

    def test_snapshot_imports_only_what_it_declares(self):
        # A fork server imports SNAPSHOT_IMPORTS for all its sandboxes; a
        # module snapshot imports beyond them would cost every session's
        # first checkpoint its import again.
        agent_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        script = (
            "import sys\n"
            "sys.path.insert(0, %r)\n"
            "import codeexec_checkpoint as C\n"
            "for name in C.SNAPSHOT_IMPORTS:\n"
            "    __import__(name)\n"
            "before = set(sys.modules)\n"
            "ns = {'x': 1, 'names': ['a'], 'blob': bytearray(3)}\n"
            "C.Checkpointer(ns, lambda name, obj: False, C.Definitions(), 1 << 20).snapshot()\n"
            "print(sorted(set(sys.modules) - before))\n" % agent_dir)
        p = subprocess.run([PYTHON, "-I", "-B", "-c", script], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "[]\n", "snapshot imported modules that SNAPSHOT_IMPORTS does not name")

    def test_values_functions_classes_and_modules_survive(self):
        self.save([
            "import math\nimport os.path as osp\nfrom collections import OrderedDict\n",
            "x = 6 * 7\nnames = ['a', 'b']\nodd = OrderedDict(a=1)\nraw = b'\\x00\\xff'\n",
            "def area(r):\n    return math.pi * r * r\n",
            "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
            "    def norm(self):\n        return math.hypot(self.x, self.y)\n",
            "class Point3(Point):\n    def __init__(self, x, y, z):\n        super().__init__(x, y)\n        self.z = z\n",
            "p = Point3(3, 4, 5)\n",
            "@checkpoint",
        ])
        report, out = self.restore(
            "print(x, names, dict(odd), raw)\n"
            "print(round(area(1), 4), p.norm(), p.z, type(p).__mro__[1].__name__)\n"
            "print(osp.join('a', 'b'), math.sqrt(16))\n")
        self.assertEqual(out, "42 ['a', 'b'] {'a': 1} b'\\x00\\xff'\n3.1416 5.0 5 Point\na/b 4.0\n", report)
        self.assertEqual(report["failed"], [])
        self.assertEqual(report["restored"],
                         sorted(["math", "osp", "OrderedDict", "x", "names", "odd", "raw", "area", "Point", "Point3", "p"]))

    def test_unsaveable_values_are_named(self):
        saved = self.save([
            "import socket, threading\n"
            "fh = open(%r, 'w')\n" % os.path.join(self.dir.name, "f.txt") +
            "sock = socket.socket()\n"
            "lock = threading.Lock()\n"
            "gen = (i for i in range(3))\n"
            "keep = 1\n",
            "@checkpoint",
        ])
        unsaved = {u["name"]: u["type"] for u in saved[-1]["manifest"]["unsaved"]}
        self.assertEqual(unsaved["fh"], "open file (TextIOWrapper)")
        self.assertEqual(unsaved["sock"], "socket")
        self.assertEqual(unsaved["gen"], "generator")
        self.assertIn("lock", unsaved)
        report, out = self.restore("print(keep, 'fh' in globals())\n")
        self.assertEqual(out, "1 False\n")
        self.assertEqual(sorted(u["name"] for u in report["unsaved"]), ["fh", "gen", "lock", "sock"])

    def test_the_unpicklable_part_of_a_container_is_named(self):
        saved = self.save([
            "import threading\n"
            "class Holder:\n    def __init__(self):\n        self.n, self.lock = 1, threading.Lock()\n"
            "results = {'ok': [1, 2], 'conn': open(%r, 'w')}\n" % os.path.join(self.dir.name, "f.txt") +
            "lst = [1, 'a', {'deep': [0, (i for i in range(2))]}]\n"
            "h = Holder()\n",
            "@checkpoint",
        ])
        unsaved = {u["name"]: u["type"] for u in saved[-1]["manifest"]["unsaved"]}
        self.assertEqual(unsaved["results"], "dict; open file (TextIOWrapper) at ['conn']")
        self.assertEqual(unsaved["lst"], "list; generator at [2]['deep'][1]")
        self.assertEqual(unsaved["h"], "__main__.Holder; thread object (lock) at .lock")

    def test_restore_runs_no_cell_code(self):
        marker = os.path.join(self.dir.name, "ran")
        self.save([
            "with open(%r, 'a') as f:\n    f.write('cell ran\\n')\n" % marker +
            "def f():\n    return 'defined'\n",
            "@checkpoint",
        ])
        with open(marker) as f:
            self.assertEqual(f.read(), "cell ran\n")
        report, out = self.restore("print(f())\n")
        self.assertEqual(out, "defined\n")
        with open(marker) as f:
            self.assertEqual(f.read(), "cell ran\n", "restoring re-ran the cell")

    def test_lambdas_decorators_and_defaults(self):
        self.save([
            "import functools\nLIMIT = 3\n",
            "double = lambda v: 2 * v\n",
            "def cached(fn):\n    return functools.lru_cache(maxsize=None)(fn)\n",
            "@cached\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
            "def clip(v, hi=LIMIT):\n    return min(v, hi)\n",
            "if True:\n    def nested_ok():\n        return 'in an if'\n",
            "@checkpoint",
        ])
        report, out = self.restore("print(double(21), fib(30), clip(10), nested_ok())\n")
        self.assertEqual(out, "42 832040 3 in an if\n", report)
        self.assertEqual(report["failed"], [])

    def test_only_changed_names_make_new_chunks(self):
        saved = self.save([
            "big = b'x' * (1 << 20)\ntable = list(range(1000))\nn = 1\n",
            "@checkpoint",
            "n = 2\n",
            "@checkpoint",
            "table.append(1000)\n",
            "@checkpoint",
            "@checkpoint",
        ])
        first, second, third, fourth = [len(s["chunks"]) for s in saved]
        self.assertEqual(first, 3)
        self.assertEqual(second, 1, "only n changed")
        self.assertEqual(third, 1, "only table changed, in place")
        self.assertEqual(fourth, 0, "nothing changed")
        self.assertGreater(saved[0]["manifest"]["bytes"], 1 << 20)
        report, out = self.restore("print(len(big), len(table), n)\n")
        self.assertEqual(out, "1048576 1001 2\n")

    def test_over_the_cap_says_what_is_large(self):
        saved = self.save(["big = 'y' * 300000\nsmall = 1\n", "@checkpoint"], cap=100000)
        self.assertIn("over the 97.7 KiB checkpoint limit (largest: big (293.0 KiB)", saved[0]["error"])

    def test_one_value_over_a_chunk_says_which(self):
        saved = self.save(["big = 'y' * 300000\nsmall = 1\n", "@checkpoint"], value_cap=100000)
        self.assertIn("big is 293.0 KiB pickled, over the 97.7 KiB one value may take", saved[0]["error"])
        self.assertIn("split it into smaller values", saved[0]["error"])

    def test_redefined_names_keep_the_latest(self):
        self.save([
            "def f():\n    return 1\nclass C:\n    v = 1\n",
            "def f():\n    return 2\nclass C:\n    v = 2\n",
            "@checkpoint",
        ])
        report, out = self.restore("print(f(), C.v)\n")
        self.assertEqual(out, "2 2\n")

    def test_restored_state_checkpoints_again(self):
        self.save(["def f():\n    return 'again'\nclass K:\n    pass\nk = K()\nv = [1]\n", "@checkpoint"])
        second = os.path.join(self.dir.name, "second.json")
        p = subprocess.run([PYTHON, "-I", "-B", DRIVER, "restore", self.path, second], input="v.append(2)\n",
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.path = second
        report, out = self.restore("print(f(), type(k).__name__, v)\n")
        self.assertEqual(out, "again K [1, 2]\n", report)
        self.assertEqual(report["failed"], [])

if __name__ == "__main__":
    unittest.main()
