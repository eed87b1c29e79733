"""Prints start-up timings: bare python3 vs the agent (run from this folder).

    /usr/bin/python3 measure_startup.py [runs]

pass: spawn to exit of `python3 -I -c pass`.
bare: spawn to first stdout byte of `python3 -I -c "os.write(1, b'x')"`.
ready: spawn to the agent's `ready` frame.
first exec: `print(1)` sent right after `ready` until its `done` (includes
the warm-up that runs after `ready`).

The agent runs from a temporary copy compiled as sandboxd's Precompile
does it (checked-hash bytecode), because that is how sandboxes run it.
"""

import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from agenthost import AGENT_DIR, PYTHON, Agent
from test_startup import _bare_first_byte


def _precompiled_copy(tmp):
    for f in glob.glob(os.path.join(AGENT_DIR, "*.py")):
        shutil.copy(f, tmp)
    subprocess.run([PYTHON, "-I", "-m", "compileall", "-q", "-l", "--invalidation-mode", "checked-hash", tmp],
                   check=True)
    return os.path.join(tmp, "agent.py")


def _bare_pass():
    t0 = time.perf_counter()
    subprocess.run([PYTHON, "-I", "-c", "pass"], env={}, check=True)
    return time.perf_counter() - t0


def main(runs):
    with tempfile.TemporaryDirectory() as tmp:
        _measure(runs, _precompiled_copy(tmp))


def _measure(runs, agent):
    npass, bare, ready, first, second = [], [], [], [], []
    for _ in range(runs):
        npass.append(_bare_pass())
        bare.append(_bare_first_byte())
        a = Agent(agent_path=agent)
        ready.append(a.ready_time)
        t0 = time.perf_counter()
        a.exec("print(1)")
        first.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        a.exec("print(1)")
        second.append(time.perf_counter() - t0)
        a.close()
    for name, xs in (("python pass", npass), ("bare python", bare), ("agent ready", ready),
                     ("first exec", first), ("later exec", second)):
        ms = sorted(x * 1000 for x in xs)
        print("%-12s median %6.2f ms  min %6.2f ms  p90 %6.2f ms"
              % (name, statistics.median(ms), ms[0], ms[int(len(ms) * 0.9) - 1]))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
