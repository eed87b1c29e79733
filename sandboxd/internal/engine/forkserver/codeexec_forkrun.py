"""What a forked sandbox runs: the agent or a script in this interpreter,
or any command executed, and how a set-up failure is reported."""

import atexit
import builtins
import os
import sys


def exit_code(status):
    """As bwrap reports its command's end: the code, or 128 + signal."""
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return 255


def fail(stage, exc, fd=2):
    """Reports a failed set-up on the sandbox's stderr, as bwrap would."""
    try:
        os.write(fd, b"codeexec fork server: %s: %s\n" % (stage.encode(), str(exc).encode()))
    finally:
        os._exit(1)


def exec_command(argv, env):
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        fail("exec %s" % argv[0], exc)


def run_agent(agent, argv):
    sys.argv = argv[2:]
    sys.modules["__main__"] = agent
    agent.main()
    os._exit(0)


def run_script(argv):
    """Runs `python -I -c SCRIPT ARGS` in this interpreter and ends the
    process as the interpreter would, without finalizing it (which would
    write to every page the server shares with this sandbox)."""
    main = type(sys)("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    sys.argv = ["-c"] + argv[4:]
    try:
        exec(compile(argv[3], "<string>", "exec"), main.__dict__)
        code = 0
    except SystemExit as exc:
        code = _system_exit_code(exc)
    except BaseException as exc:  # noqa: BLE001 - reported like an uncaught exception
        sys.excepthook(type(exc), exc, exc.__traceback__.tb_next)
        code = 1
    if "threading" in sys.modules:
        sys.modules["threading"]._shutdown()  # waits for non-daemon threads, as finalization does
    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:  # noqa: BLE001
            code = 120
    os._exit(code)


def _system_exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:  # noqa: BLE001
        pass
    return 1
