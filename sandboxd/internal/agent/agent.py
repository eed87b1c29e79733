"""codeexec sandbox agent: runs user Python for sandboxd (docs/PROTOCOL.md).

Run as `/usr/bin/python3 -I /opt/codeexec/agent.py` with the channel on
stdin/stdout. This file does only what must happen before `ready`: take the
channel off fds 0 and 1, point fds 0, 1 and 2 at /dev/null, and send
`ready`. That needs only modules the interpreter has already loaded, so the
agent adds almost nothing to Python's own start-up. The rest (json, threads,
the runtime API) is imported after `ready`, while sandboxd is still
preparing the first exec; an exec that arrives meanwhile waits in the pipe.
"""

import os
import sys


def _setup():
    sys.dont_write_bytecode = True
    diag = os.dup(2)  # the original stderr: diagnostics for sandboxd's log
    cin = os.dup(0)  # os.dup makes close-on-exec descriptors
    cout = os.dup(1)
    # Until the first exec points fds 1 and 2 at its capture pipes, they
    # (and fd 0 for good) lead to /dev/null: never to the channel.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    body = ('{"t":"ready","python":"%d.%d.%d","pid":%d}'
            % (sys.version_info[0], sys.version_info[1], sys.version_info[2], os.getpid())).encode()
    os.write(cout, len(body).to_bytes(4, "big") + body)
    return cin, cout, diag


def main():
    fds = _setup()
    diag = fds[2]
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        # -I leaves the script's folder off sys.path; add it just for our modules.
        sys.path.insert(0, here)
        try:
            import codeexec_session
        finally:
            sys.path.remove(here)
        # User imports resolve against the working directory (/workspace),
        # as in a notebook.
        sys.path.insert(0, os.getcwd())
        codeexec_session.Session(*fds).serve()
    except BaseException:
        import traceback

        os.write(diag, ("codeexec agent: failed\n" + traceback.format_exc()).encode())
        os._exit(70)


if __name__ == "__main__":
    main()
