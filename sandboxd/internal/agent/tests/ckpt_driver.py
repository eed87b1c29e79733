"""Runs cells in a namespace set up as the agent sets it up (a fresh
`__main__` module), then checkpoints it, or restores a checkpoint into a
fresh one and runs a probe. test_checkpoint.py drives it in a new
interpreter each time, as a sandbox would be.

  ckpt_driver.py save FILE [CAP] < cells.json    writes {manifest, chunks}
  ckpt_driver.py restore FILE [OUT] < probe.py    prints the report, runs the probe,
                                                  and with OUT checkpoints the result there
"""

import base64
import json
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import codeexec_checkpoint as C  # noqa: E402
import codeexec_source  # noqa: E402


def main():
    mode, path = sys.argv[1], sys.argv[2]
    codeexec_source.install()
    mod = types.ModuleType("__main__")
    sys.modules["__main__"] = mod
    ns = mod.__dict__
    ns["__builtins__"] = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
    helper = object()
    ns["runtime"] = helper  # stands for the agent's helpers, never saved
    defs = C.Definitions()

    def add(filename, source):
        codeexec_source.register(filename, source)
        defs.add_cell(filename, source)

    if mode == "save":
        cap = int(sys.argv[3]) if len(sys.argv) > 3 else 1 << 30
        cells = json.load(sys.stdin)
        cp = C.Checkpointer(ns, lambda name, obj: obj is helper, defs, cap)
        if len(sys.argv) > 4:
            cp.value_cap = int(sys.argv[4])
        out = []
        for i, src in enumerate(cells):
            if src == "@checkpoint":
                try:
                    manifest, chunks = cp.snapshot()
                except C.TooLarge as exc:
                    out.append({"error": str(exc)})
                    continue
                cp.committed(manifest)
                out.append({"manifest": manifest, "chunks": {k: base64.b64encode(v).decode() for k, v in chunks.items()}})
                continue
            filename = "<cell-%d>" % (i + 1)
            add(filename, src)
            exec(compile(src, filename, "exec", dont_inherit=True), ns)
        with open(path, "w") as f:
            json.dump(out, f)
        return
    with open(path) as f:
        saved = json.load(f)
    chunks = {}
    for s in saved:
        chunks.update({k: base64.b64decode(v) for k, v in s.get("chunks", {}).items()})
    manifest = saved[-1]["manifest"]
    report = C.restore(ns, manifest, chunks, on_source=add)
    print(json.dumps(report, sort_keys=True))
    probe = sys.stdin.read()
    if probe:
        exec(compile(probe, "<probe>", "exec", dont_inherit=True), ns)
    if len(sys.argv) > 3:
        cp = C.Checkpointer(ns, lambda name, obj: obj is helper, defs, 1 << 30)
        manifest, chunks = cp.snapshot()
        with open(sys.argv[3], "w") as f:
            json.dump([{"manifest": manifest, "chunks": {k: base64.b64encode(v).decode() for k, v in chunks.items()}}], f)


main()
