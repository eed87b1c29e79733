"""Source text of cells and saved tools, for tracebacks and inspect.

Code compiled from a string has no file, so its source is put into
linecache.cache under the code's filename (`<cell-N>`): tracebacks then show
source lines and inspect.getsource works for functions of earlier cells.

linecache imports tokenize and re (about 10 ms), so it is not imported just
for this: until something imports it, sources wait in _pending, and a
sys.meta_path hook adds them the moment linecache is loaded.
"""

import sys

_pending = {}


def register(filename, source):
    lines = source.splitlines(True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    # mtime None: linecache.checkcache never evicts the entry.
    entry = (len(source), None, lines, filename)
    lc = sys.modules.get("linecache")
    if lc is not None:
        lc.cache[filename] = entry
    else:
        _pending[filename] = entry


class _Loader:
    def __init__(self, real):
        self._real = real

    def create_module(self, spec):
        return self._real.create_module(spec)

    def exec_module(self, module):
        self._real.exec_module(module)
        module.cache.update(_pending)
        _pending.clear()


class _Hook:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "linecache" or not _pending:
            return None
        spec = sys.modules["_frozen_importlib_external"].PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def install():
    if "linecache" not in sys.modules:
        sys.meta_path.insert(0, _Hook)
