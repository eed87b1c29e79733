"""JSON through the C accelerator `_json`, without importing `json`.

`import json` pulls in re, enum and functools (several milliseconds);
the agent only needs compact dumps and strict loads, which `_json` alone
provides. Behaviour matches json.dumps(separators=(",", ":"),
allow_nan=False) and json.loads. It also checks what memory stores:
a key memoryd accepts, a value that is JSON.
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


MAX_KEY_BYTES = 2048  # memoryd's limit (store.MaxKeyBytes)


def memory_key(key):
    """The key as stored: surrounding whitespace stripped, as upstream
    strips it, so " notes " and "notes" are one memory."""
    if not isinstance(key, str):
        raise TypeError("memory key must be a str, not %s" % type(key).__name__)
    key = key.strip()
    if not key:
        raise ValueError("Memory key cannot be empty: use a name such as 'notes' "
                         "(surrounding whitespace is stripped)")
    try:
        n = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("memory key must be valid Unicode (it holds a lone surrogate)") from None
    if n > MAX_KEY_BYTES:
        raise ValueError("memory key is %d UTF-8 bytes; the limit is %d (keep the data in the value)"
                         % (n, MAX_KEY_BYTES))
    return key


def check(value, what):
    def reject(obj):
        raise TypeError("%s of type %s is not JSON serialisable" % (what, type(obj).__name__))

    try:
        dumps(value, True, reject)
    except ValueError as exc:  # NaN/Infinity, circular references
        raise ValueError("%s is not valid JSON: %s" % (what, exc)) from None
