"""Rich display: figures, images, tables and the last expression."""


import os
import unittest

from agenthost import Agent


def _has(mod):
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


def _png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


class LastExpressionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Agent()
        cls.a.exec("a = 6")

    @classmethod
    def tearDownClass(cls):
        cls.a.close()

    def test_value_shown(self):
        r = self.a.exec("a = 6\na * 7")
        self.assertEqual(r.stdout, "42\n")

    def test_repr_not_str(self):
        r = self.a.exec("'text'")
        self.assertEqual(r.stdout, "'text'\n")

    def test_none_shows_nothing(self):
        r = self.a.exec("print('x')\nNone")
        self.assertEqual(r.stdout, "x\n")
        r = self.a.exec("print('y')")  # print returns None
        self.assertEqual(r.stdout, "y\n")

    def test_semicolon_suppresses(self):
        for code in ("a * 7;", "a * 7 ;  # comment", "b = 1; a * 7;"):
            r = self.a.exec(code)
            self.assertEqual(r.stdout, "", code)

    def test_comment_with_semicolon_does_not_suppress(self):
        r = self.a.exec("a * 7  # not; suppressed")
        self.assertEqual(r.stdout, "42\n")

    def test_only_the_last_statement(self):
        r = self.a.exec("1\n2\nx = 3")
        self.assertEqual(r.stdout, "")
        r = self.a.exec("1\n2\n3")
        self.assertEqual(r.stdout, "3\n")

    def test_multiline_and_unicode(self):
        r = self.a.exec("s = 'é' \nsum([\n  1,\n  2,\n])")
        self.assertEqual(r.stdout, "3\n")
        r = self.a.exec("'é€' ;")
        self.assertEqual(r.stdout, "")

    def test_await_as_last_expression(self):
        r = self.a.exec("import asyncio\nasync def f():\n    return 5\nawait f()")
        self.assertTrue(r.ok, r)
        self.assertEqual(r.stdout, "5\n")

    def test_long_repr_is_bounded(self):
        r = self.a.exec("list(range(100000))")
        self.assertLess(len(r.stdout), 11000)
        self.assertIn("characters of this value's repr left out", r.stdout)
        self.assertTrue(r.stdout.rstrip().endswith("99999]"), r.stdout[-100:])

    def test_exception_in_last_expression(self):
        r = self.a.exec("x = 1\n1 / 0")
        self.assertFalse(r.ok)
        self.assertIn("ZeroDivisionError", r.stderr)
        self.assertIn("line 2", r.stderr)

    def test_failing_repr_is_reported(self):
        r = self.a.exec("class B:\n    def __repr__(self):\n        raise ValueError('no')\nB()")
        self.assertTrue(r.ok, r)
        self.assertIn("repr failed: ValueError: no", r.stdout)

    def test_display_of_text_values(self):
        r = self.a.exec("display(1, 'two', None)")
        self.assertEqual(r.stdout, "1\n'two'\nNone\n")

    def test_list_of_dicts_as_table(self):
        r = self.a.exec("rows = [{'name': 'a', 'n': 1}, {'name': 'b|c', 'n': 2, 'x': 'y'}]\nrows")
        self.assertEqual(r.stdout, "| name | n | x |\n|---|---|---|\n| a | 1 |  |\n| b\\|c | 2 | y |\n")

    def test_long_list_of_dicts_keeps_head_and_tail(self):
        r = self.a.exec("[{'i': i} for i in range(1000)]")
        lines = r.stdout.splitlines()
        self.assertEqual(lines[2], "| 0 |")
        self.assertEqual(lines[-2], "| 999 |")
        self.assertEqual(lines[-1], "[1,000 rows]")
        self.assertLess(len(lines), 30)


class ImageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Agent()

    @classmethod
    def tearDownClass(cls):
        cls.a.close()

    def test_png_bytes(self):
        png = _tiny_png(3, 2)
        r = self.a.exec("display(%r)" % png)
        self.assertTrue(r.ok, r)
        self.assertEqual(len(r.displays), 1)
        d = r.displays[0]
        self.assertEqual((d["mime"], d["w"], d["h"]), ("image/png", 3, 2))
        self.assertEqual(d["blobs"]["image"], png)

    def test_other_bytes_are_text(self):
        r = self.a.exec("b'abc'")
        self.assertEqual(r.stdout, "b'abc'\n")
        self.assertEqual(r.displays, [])

    def test_too_large_without_a_way_to_shrink_is_named(self):
        png = _tiny_png(3, 2)
        r = self.a.exec("display(%r)" % png, display={"bytes": 10})
        self.assertEqual(r.displays, [])
        self.assertIn("[display: ", r.stderr)
        self.assertIn("/workspace/out", r.stderr)

    def test_call_limit_names_what_was_not_sent(self):
        png = _tiny_png(3, 2)
        r = self.a.exec("for _ in range(3):\n    display(%r)" % png, display={"call_images": 2})
        self.assertEqual(len(r.displays), 2)
        self.assertIn("reached the limit of 2 images", r.stderr)

    @unittest.skipUnless(_has("PIL"), "Pillow is not installed for /usr/bin/python3")
    def test_pil_image_via_display(self):
        r = self.a.exec("from PIL import Image\nim = Image.new('RGB', (300, 200), 'red')\ndisplay(im)")
        self.assertTrue(r.ok, r)
        self.assertEqual(len(r.displays), 1)
        d = r.displays[0]
        self.assertEqual((d["mime"], d["w"], d["h"]), ("image/png", 300, 200))
        self.assertEqual(_png_size(d["blobs"]["image"]), (300, 200))

    @unittest.skipUnless(_has("PIL"), "Pillow is not installed for /usr/bin/python3")
    def test_pil_image_is_downscaled(self):
        r = self.a.exec("from PIL import Image\nImage.new('RGB', (4000, 1000), 'blue')")
        d = r.displays[0]
        self.assertEqual((d["w"], d["h"]), (1568, 392))
        self.assertEqual(_png_size(d["blobs"]["image"]), (1568, 392))

    @unittest.skipUnless(_has("PIL"), "Pillow is not installed for /usr/bin/python3")
    def test_noisy_image_over_the_byte_limit_becomes_jpeg(self):
        r = self.a.exec("import os\nfrom PIL import Image\nImage.frombytes('RGB', (800, 800), os.urandom(800*800*3))",
                        display={"bytes": 200000})
        self.assertTrue(r.ok, r)
        d = r.displays[0]
        self.assertEqual(d["mime"], "image/jpeg")
        self.assertLessEqual(len(d["blobs"]["image"]), 200000)

    @unittest.skipUnless(_has("matplotlib"), "matplotlib is not installed for /usr/bin/python3")
    def test_matplotlib_figure_open_at_the_end(self):
        r = self.a.exec("import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 2, 3])")
        self.assertTrue(r.ok, r)
        self.assertEqual(r.stdout, "")  # the Line2D list is not shown
        self.assertEqual(len(r.displays), 1)
        self.assertEqual(_png_size(r.displays[0]["blobs"]["image"]), (400, 300))
        r = self.a.exec("import matplotlib.pyplot as plt\nlen(plt.get_fignums())")
        self.assertEqual(r.stdout, "0\n")  # closed once shown
        self.assertEqual(r.displays, [])

    @unittest.skipUnless(_has("matplotlib"), "matplotlib is not installed for /usr/bin/python3")
    def test_plt_show_and_display_figure_once_each(self):
        r = self.a.exec(
            "import matplotlib.pyplot as plt\n"
            "f1 = plt.figure(figsize=(2, 2), dpi=50); plt.plot([1])\n"
            "plt.show()\n"
            "print('between')\n"
            "f2, ax = plt.subplots(figsize=(3, 2), dpi=50)\n"
            "display(f2)\n"
            "f2")
        self.assertTrue(r.ok, r)
        sizes = [_png_size(d["blobs"]["image"]) for d in r.displays]
        self.assertEqual(sizes, [(100, 100), (150, 100), (150, 100)])
        self.assertEqual(r.stdout, "between\n")

    @unittest.skipUnless(_has("matplotlib"), "matplotlib is not installed for /usr/bin/python3")
    def test_large_figure_is_bounded(self):
        r = self.a.exec("import matplotlib.pyplot as plt\nplt.figure(figsize=(40, 10), dpi=100)",
                        display={"side": 800})
        w, h = _png_size(r.displays[0]["blobs"]["image"])
        self.assertEqual(w, 800)
        self.assertEqual(h, 200)

    @unittest.skipUnless(_has("matplotlib"), "matplotlib is not installed for /usr/bin/python3")
    def test_matplotlib_keeps_its_cache_out_of_the_workspace(self):
        self.a.exec("import matplotlib.pyplot as plt\nplt.figure()")
        self.assertFalse(os.path.exists(os.path.join(self.a.cwd, ".cache")))
        self.assertFalse(os.path.exists(os.path.join(self.a.cwd, ".config")))

    @unittest.skipUnless(_has("pandas"), "pandas is not installed for /usr/bin/python3")
    def test_dataframe_as_compact_table(self):
        r = self.a.exec("import pandas as pd\npd.DataFrame({'a': range(1000), 'b': ['x'] * 1000})")
        self.assertTrue(r.ok, r)
        self.assertIn("[1,000 rows x 2 columns]", r.stdout)
        self.assertIn("999", r.stdout)
        self.assertLess(len(r.stdout.splitlines()), 30)


def _tiny_png(w, h):
    import struct
    import zlib

    def chunk(kind, data):
        c = struct.pack(">I", len(data)) + kind + data
        return c + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * w for _ in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


if __name__ == "__main__":
    unittest.main()


