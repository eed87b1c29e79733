"""JSON through the C accelerator `_json`, without importing `json`.

`import json` pulls in re, enum and functools (several milliseconds);
the agent only needs compact dumps and strict loads, which `_json` alone
provides. Behaviour matches json.dumps(separators=(",", ":"),
allow_nan=False) and json.loads.
"""

import _json


def _constant(name):
    raise ValueError("JSON does not allow %s" % name)


class _Context:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_constant)
    memo = {}


_scan = _json.make_scanner(_Context())
_WS = " \t\n\r"


def _no_default(obj):
    raise TypeError("value of type %s is not JSON serialisable" % type(obj).__name__)


def dumps(obj, ascii=True, default=_no_default):
    """Compact JSON text of obj; rejects NaN/Infinity and circular values."""
    enc = _json.make_encoder(
        {}, default, _json.encode_basestring_ascii if ascii else _json.encode_basestring,
        None, ":", ",", False, False, False)
    return "".join(enc(obj, 0))


def loads(data):
    """Parses one JSON value from str or UTF-8 bytes."""
    s = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    i = len(s) - len(s.lstrip(_WS))
    try:
        obj, end = _scan(s, i)
    except StopIteration as exc:
        raise ValueError("invalid JSON at offset %d" % exc.value) from None
    if s[end:].strip(_WS):
        raise ValueError("extra data after JSON value at offset %d" % end)
    return obj
