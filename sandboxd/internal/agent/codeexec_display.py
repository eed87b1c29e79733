"""Rich display: figures and images back as image content, tables as text.

`display(x)` (a bare name in every session), a cell's last expression,
`plt.show()` and the matplotlib figures still open when a cell ends all
come here. Images (a matplotlib figure, a PIL image, PNG or JPEG bytes,
anything with `_repr_png_`/`_repr_jpeg_`) are bounded to the exec's
limits (longest side, bytes per image, bytes and count per call), shrunk
with Pillow or matplotlib when over them, and sent as `display` frames
(docs/PROTOCOL.md). An image that cannot be shrunk or sent is named on
stderr with what to do instead, never dropped without a word. A
DataFrame, a Series or a list of dicts prints as a compact table, and
anything else as its repr, cut in the middle past TEXT_LIMIT.

Nothing here imports matplotlib, PIL or pandas: each is used only when
the object shown comes from it, so display costs a cell nothing else.
"""

import os
import sys

# The defaults the exec frame's "display" overrides (docs/PROTOCOL.md):
# longest side, bytes per image, bytes of images per call, images per call.
SIDE = 1568
IMAGE_BYTES = 512 << 10
CALL_BYTES = 640 << 10
CALL_IMAGES = 10
# The longest text one display prints; the output budget bounds the rest.
TEXT_LIMIT = 10000
TABLE_ROWS = 20
TABLE_COLS = 12
CELL_CHARS = 40

_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG = b"\xff\xd8\xff"


class Limits:
    __slots__ = ("side", "image_bytes", "call_bytes", "call_images")

    def __init__(self, d=None):
        d = d if isinstance(d, dict) else {}

        def pos(key, default):
            v = d.get(key)
            return v if type(v) is int and v > 0 else default

        self.side = pos("side", SIDE)
        self.image_bytes = pos("bytes", IMAGE_BYTES)
        self.call_bytes = pos("call_bytes", CALL_BYTES)
        self.call_images = pos("call_images", CALL_IMAGES)


class Shower:
    """Sends one exec's displays; begin() starts each exec."""

    def __init__(self, chan):
        self.chan = chan
        self.exec_id = 0
        self.limits = Limits()
        self.sent_bytes = 0
        self.sent = 0
        self.shown_figures = set()  # ids of figures shown in this exec

    def begin(self, exec_id, limits):
        self.exec_id = exec_id
        self.limits = Limits(limits)
        self.sent_bytes = self.sent = 0
        self.shown_figures = set()

    # --- what to show --------------------------------------------------

    def display(self, *objs):
        for obj in objs:
            self.show(obj)

    def show(self, obj, last=False):
        """Shows obj: an image, a table, or its repr. last marks a cell's
        last expression, whose None shows nothing."""
        if obj is None and last:
            return
        kind = _kind(obj)
        if last and kind == "repr" and _is_artists(obj):
            return  # plt.plot(...) as the last line: the figure is shown at the end
        try:
            if kind == "figure":
                self.shown_figures.add(id(obj))
                self._image(*_figure_png(obj, self.limits.side), what="figure")
            elif kind == "pil":
                self._pil(obj, "image")
            elif kind == "bytes":
                self._bytes(bytes(obj))
            elif kind == "repr_image":
                self._bytes(bytes(_repr_image(obj)))
            elif kind == "frame":
                _print(_frame_table(obj))
            elif kind == "records":
                _print(records_table(obj))
            else:
                _print(bounded(_safe_repr(obj)))
        except Exception as exc:  # noqa: BLE001 - a display must never fail the cell
            _note("could not display %s: %s: %s" % (_type_name(obj), type(exc).__name__, exc))

    def show_figures(self):
        """Shows every open matplotlib figure not shown yet in this exec,
        then closes them all (plt.show(), and the end of a cell)."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            figs = [plt.figure(n) for n in plt.get_fignums()]
        except Exception:  # noqa: BLE001
            return
        for fig in figs:
            if id(fig) not in self.shown_figures:
                self.show(fig)
        try:
            plt.close("all")
        except Exception:  # noqa: BLE001
            pass

    # --- images ----------------------------------------------------------

    def _pil(self, im, what):
        self._image(*_pil_encoded(im, self.limits), what=what)

    def _bytes(self, data):
        info = image_info(data)
        if info is None:
            _print(bounded(_safe_repr(data)))
            return
        mime, w, h = info
        lim = self.limits
        if max(w, h) <= lim.side and len(data) <= lim.image_bytes:
            self._image(data, mime, w, h, what="image")
            return
        try:
            from PIL import Image
        except ImportError:
            _note("an image of %dx%d px and %s is over the limit of %d px and %s, and Pillow, which "
                  "would shrink it, is not installed; write it under /workspace/out to get it as a file"
                  % (w, h, _size(len(data)), lim.side, _size(lim.image_bytes)))
            return
        import io

        with Image.open(io.BytesIO(data)) as im:
            im.load()
            self._pil(im, "image")

    def _image(self, data, mime, w, h, what):
        lim = self.limits
        if len(data) > lim.image_bytes:
            _note("a %s of %dx%d px could not be made smaller than %s (the limit is %s); "
                  "write it under /workspace/out to get it as a file" % (what, w, h, _size(len(data)), _size(lim.image_bytes)))
            return
        if self.sent >= lim.call_images or self.sent_bytes + len(data) > lim.call_bytes:
            _note("a %s of %dx%d px was not sent: this call's images reached the limit of %d images and %s; "
                  "show fewer per call, or write them under /workspace/out" % (what, w, h, lim.call_images, _size(lim.call_bytes)))
            return
        self.sent += 1
        self.sent_bytes += len(data)
        flush = getattr(sys.stdout, "flush", None)
        if flush is not None:
            try:
                flush()
            except Exception:  # noqa: BLE001
                pass
        self.chan.send_display(self.exec_id, mime, w, h, data)


def _kind(obj):
    t = type(obj)
    mod = t.__module__ or ""
    if mod.startswith("matplotlib") and hasattr(obj, "savefig") and hasattr(obj, "get_size_inches"):
        return "figure"
    if mod.startswith("PIL") and hasattr(obj, "save") and hasattr(obj, "size"):
        return "pil"
    if isinstance(obj, (bytes, bytearray, memoryview)):
        head = bytes(obj[:8])
        if head.startswith(_PNG) or head.startswith(_JPEG):
            return "bytes"
        return "repr"
    if mod.startswith("pandas") and t.__name__ in ("DataFrame", "Series") and hasattr(obj, "to_string"):
        return "frame"
    if isinstance(obj, list) and obj and all(isinstance(r, dict) for r in obj[:1000]):
        return "records"
    if isinstance(obj, type):
        return "repr"
    if callable(getattr(obj, "_repr_png_", None)) or callable(getattr(obj, "_repr_jpeg_", None)):
        return "repr_image"
    return "repr"


def _is_artists(obj):
    """A matplotlib artist, or a list or tuple of them."""
    items = obj if isinstance(obj, (list, tuple)) and obj else (obj,)
    for o in items[:100]:
        mod = type(o).__module__ or ""
        if not mod.startswith("matplotlib") or not hasattr(o, "get_figure"):
            return False
    return True


def _repr_image(obj):
    for name in ("_repr_png_", "_repr_jpeg_"):
        f = getattr(obj, name, None)
        if callable(f):
            data = f()
            if isinstance(data, str):  # IPython allows base64 text
                import binascii

                data = binascii.a2b_base64(data)
            if data:
                return data
    raise ValueError("its _repr_png_/_repr_jpeg_ returned nothing")


def image_info(data):
    """(mime, width, height) of PNG or JPEG bytes, None for other bytes."""
    if data.startswith(_PNG) and len(data) >= 24 and data[12:16] == b"IHDR":
        return "image/png", int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data.startswith(_JPEG):
        i, n = 2, len(data)
        while i + 9 < n:
            if data[i] != 0xFF:
                i += 1
                continue
            marker = data[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
                i += 1 if marker == 0xFF else 2
                continue
            seg = int.from_bytes(data[i + 2:i + 4], "big")
            # SOF0..SOF15, less DHT (C4), JPG (C8) and DAC (CC).
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                return "image/jpeg", int.from_bytes(data[i + 7:i + 9], "big"), int.from_bytes(data[i + 5:i + 7], "big")
            i += 2 + seg
        return None
    return None


def _figure_png(fig, side):
    """A figure as PNG at its own dpi, or less so that its longest side
    fits side pixels."""
    import io

    w_in, h_in = fig.get_size_inches()
    dpi = float(fig.dpi)
    longest = max(w_in, h_in) * dpi
    if longest > side:
        dpi *= side / longest
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    data = buf.getvalue()
    info = image_info(data)
    _, w, h = info if info else ("", int(w_in * dpi), int(h_in * dpi))
    return data, "image/png", w, h


def _pil_encoded(im, lim):
    """A PIL image as PNG, or JPEG when PNG is over the byte limit,
    shrunk until it fits lim's side and bytes."""
    import io

    if max(im.size) > lim.side:
        im = im.copy()
        im.thumbnail((lim.side, lim.side))
    for _ in range(6):
        rgb = im if im.mode in ("RGB", "RGBA", "L", "LA", "P", "1") else im.convert("RGBA")
        buf = io.BytesIO()
        rgb.save(buf, format="PNG", optimize=False)
        data, mime = buf.getvalue(), "image/png"
        if len(data) > lim.image_bytes:
            buf = io.BytesIO()
            flat = im.convert("RGB")
            flat.save(buf, format="JPEG", quality=85)
            data, mime = buf.getvalue(), "image/jpeg"
        if len(data) <= lim.image_bytes:
            return data, mime, im.size[0], im.size[1]
        scale = max(0.3, (lim.image_bytes / len(data)) ** 0.5 * 0.9)
        im = im.resize((max(1, int(im.size[0] * scale)), max(1, int(im.size[1] * scale))))
    return data, mime, im.size[0], im.size[1]


# --- text --------------------------------------------------------------


def bounded(text, limit=TEXT_LIMIT):
    """text, cut in the middle with a marker when longer than limit."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    return "%s\n[… %s characters of this value's repr left out …]\n%s" % (
        text[:head], format(len(text) - head - tail, ","), text[-tail:])


def _safe_repr(obj):
    try:
        return repr(obj)
    except Exception as exc:  # noqa: BLE001
        return "<%s: repr failed: %s: %s>" % (_type_name(obj), type(exc).__name__, exc)


def _frame_table(df):
    text = df.to_string(max_rows=TABLE_ROWS, max_cols=TABLE_COLS, max_colwidth=CELL_CHARS)
    rows = getattr(df, "shape", (0,))
    if len(rows) == 2 and (rows[0] > TABLE_ROWS or rows[1] > TABLE_COLS):
        text += "\n[%s rows x %s columns]" % (format(rows[0], ","), format(rows[1], ","))
    return bounded(text)


def _cell(v):
    s = v if isinstance(v, str) else _safe_repr(v)
    s = s.replace("\n", "\\n").replace("|", "\\|")
    return s if len(s) <= CELL_CHARS else s[:CELL_CHARS - 1] + "…"


def records_table(rows):
    """A list of dicts as a markdown table: the keys of the first rows as
    columns, at most TABLE_ROWS rows (head and tail) and TABLE_COLS
    columns, long cells cut."""
    cols = []
    for r in rows[:TABLE_ROWS * 5]:
        for k in r:
            if k not in cols:
                cols.append(k)
    more_cols = len(cols) - TABLE_COLS
    cols = cols[:TABLE_COLS]
    if len(rows) > TABLE_ROWS:
        half = TABLE_ROWS // 2
        shown = rows[:half] + [None] + rows[-half:]
    else:
        shown = rows
    lines = ["| " + " | ".join(_cell(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in shown:
        if r is None:
            lines.append("| " + " | ".join("…" for _ in cols) + " |")
            continue
        lines.append("| " + " | ".join(_cell(r.get(c, "")) for c in cols) + " |")
    foot = []
    if len(rows) > TABLE_ROWS:
        foot.append("%s rows" % format(len(rows), ","))
    if more_cols > 0:
        foot.append("%d more columns not shown" % more_cols)
    if foot:
        lines.append("[" + "; ".join(foot) + "]")
    return bounded("\n".join(lines))


def _print(text):
    sys.stdout.write(text + "\n")


def _note(text):
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass
    sys.stderr.write("[display: " + text + "]\n")


def _type_name(obj):
    return type(obj).__qualname__


def _size(n):
    if n >= 1 << 20:
        return "%.1f MiB" % (n / (1 << 20))
    if n >= 1 << 10:
        return "%d KiB" % (n >> 10)
    return "%d bytes" % n


# --- matplotlib ----------------------------------------------------------

BACKEND = "module://codeexec_mpl"
_HERE = os.path.dirname(os.path.abspath(__file__))


class _BackendFinder:
    """Finds the agent's matplotlib backend, codeexec_mpl, which is not on
    sys.path (the agent's folder is not): matplotlib imports it by name."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "codeexec_mpl":
            return None
        import importlib.util

        return importlib.util.spec_from_file_location(name, os.path.join(_HERE, "codeexec_mpl.py"))


def install():
    """Makes matplotlib draw with the agent's backend, whose show() sends
    the figures, and keep its caches out of /workspace (HOME), which is
    checkpointed with the session."""
    sys.meta_path.append(_BackendFinder)
    os.environ.setdefault("MPLBACKEND", BACKEND)
    os.environ.setdefault("MPLCONFIGDIR", "/tmp/matplotlib")


_shower = None


def set_shower(shower):
    global _shower
    _shower = shower


def display(*objs):
    """Shows each object in the result: a matplotlib figure, a PIL image or
    PNG/JPEG bytes as an image; a DataFrame or a list of dicts as a table;
    anything else as its repr."""
    if _shower is not None:
        _shower.display(*objs)


def show_figures():
    if _shower is not None:
        _shower.show_figures()
