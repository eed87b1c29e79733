"""The session: the persistent namespace and the exec loop.

User code runs in the main thread, in the dict of a module named
`__main__` that replaces the agent's own entry in sys.modules. So
`if __name__ == "__main__":` works, and pickle, dataclasses and
multiprocessing find the user's classes and functions.
"""

import os
import sys
from _thread import start_new_thread

import codeexec_channel
import codeexec_display
import codeexec_durable
import codeexec_interrupt
import codeexec_network
import codeexec_output
import codeexec_persist
import codeexec_protocol
import codeexec_runtime
import codeexec_servers
import codeexec_source
import codeexec_stdio
import codeexec_workspace

PyCF_ALLOW_TOP_LEVEL_AWAIT = 0x2000  # ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, without importing ast
PyCF_ONLY_AST = 0x400  # ast.PyCF_ONLY_AST
CO_COROUTINE = 0x80  # inspect.CO_COROUTINE
FENCE_TIMEOUT = 30.0

_AGENT_DIR = os.path.dirname(os.path.abspath(__file__))


def _agent_file(filename):
    return filename.startswith(_AGENT_DIR + os.sep)


def _trim(exc, seen):
    """Drops agent frames from exc's traceback (and its cause/context)."""
    if exc is None or id(exc) in seen:
        return
    seen.add(id(exc))
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    # Frames before the first cell frame are the agent (and asyncio) calling
    # into user code; agent frames after it are helpers such as call_tool.
    for i, tb in enumerate(frames):
        if tb.tb_frame.f_code.co_filename.startswith("<cell-"):
            frames = frames[i:]
            break
    else:
        # No user frame: raised by the machinery around the code (compile,
        # the event loop on SIGINT), which is not the user's to read.
        frames = []
    kept = [tb for tb in frames if not _agent_file(tb.tb_frame.f_code.co_filename)]
    for a, b in zip(kept, kept[1:]):
        a.tb_next = b
    if kept:
        kept[-1].tb_next = None
    exc.__traceback__ = kept[0] if kept else None
    _trim(exc.__cause__, seen)
    _trim(exc.__context__, seen)
    for sub in getattr(exc, "exceptions", None) or ():
        if isinstance(sub, BaseException):
            _trim(sub, seen)


def _describe(exc):
    name = type(exc).__qualname__
    try:
        msg = str(exc)
    except Exception:  # noqa: BLE001
        msg = "<unprintable %s>" % name
    msg = " ".join(msg.split("\n")).strip()
    return "%s: %s" % (name, msg) if msg else name


async def _in_loop(code, last, ns):
    r = eval(code, ns)
    if code.co_flags & CO_COROUTINE:
        await r
    if last is None:
        return None
    v = eval(last, ns)
    if last.co_flags & CO_COROUTINE:
        v = await v
    return v


def _split_last(source, filename):
    """Compiles a cell as the code before its last statement and, when
    that statement is an expression not ended by ";", the expression,
    whose value is shown as in a notebook. The second is None otherwise.
    The AST classes come from _ast, which the interpreter has built in."""
    import _ast

    flags = PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(source, filename, "exec", flags=flags | PyCF_ONLY_AST, dont_inherit=True)
    body = tree.body
    if not body or type(body[-1]) is not _ast.Expr or _suppressed(source, body[-1]):
        return compile(tree, filename, "exec", flags=flags, dont_inherit=True), None
    last = body.pop()
    head = compile(tree, filename, "exec", flags=flags, dont_inherit=True)
    expr = compile(_ast.Expression(body=last.value), filename, "eval", flags=flags, dont_inherit=True)
    return head, expr


def _suppressed(source, node):
    """Whether the statement node is followed by ";" (which, as in a
    notebook, hides the value). Only white space, ";" and comments can
    follow the last statement."""
    lines = source.splitlines()
    rest = lines[node.end_lineno - 1].encode("utf-8")[node.end_col_offset:].decode("utf-8", "replace")
    return rest.lstrip().startswith(";")


@codeexec_interrupt.mark_interruptible
def _drive(loop, task):
    # SIGINT may interrupt the event loop itself (as with asyncio.run) while
    # it runs a cell; _run_coroutine then cancels the cell.
    loop.run_until_complete(task)


class Session:
    def __init__(self, cin, cout, diag_fd):
        self.chan = codeexec_channel.Channel(cin, cout, diag_fd)
        self.capture = codeexec_output.Capture(self.chan)
        self.outfiles = codeexec_workspace.OutFiles(os.getcwd())
        self.shower = codeexec_display.Shower(self.chan)
        codeexec_display.set_shower(self.shower)
        codeexec_display.install()
        self.cells = 0
        self.loop = None
        self.pid = os.getpid()
        self.installed = {}  # names this agent put into the namespace per exec

        codeexec_source.install()
        codeexec_network.install()
        extra = codeexec_persist.install(self.chan)
        extra["display"] = codeexec_display.display
        self.runtime = codeexec_servers.install(self.chan, extra)

        main = type(sys)("__main__")
        ns = main.__dict__
        ns["__builtins__"] = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
        ns["runtime"] = self.runtime
        ns["mcp"] = sys.modules["mcp"]
        ns.update(extra)
        self.extra = extra
        # Keep the entry module alive and reachable, then hand __main__ over.
        sys.modules["codeexec_agent"] = sys.modules.get("__main__")
        sys.modules["__main__"] = main
        self.ns = ns

        self.durable = codeexec_durable.Durable(self)
        codeexec_persist.set_source_finder(self.durable.source_of)

        os.register_at_fork(after_in_child=self._after_fork_in_child)
        codeexec_interrupt.install()
        codeexec_stdio.install()

    def _after_fork_in_child(self):
        self.chan.after_fork_in_child()
        self.capture.after_fork_in_child()

    def serve(self):
        start_new_thread(self.chan.read_loop, ())
        while True:
            try:
                task = self.chan.execs.get()
                if isinstance(task, codeexec_protocol.Restore):
                    self.durable.restore(task)
                else:
                    self.run(task)
            except KeyboardInterrupt:
                continue  # a stray SIGINT between execs must not end the session

    # --- one exec ---------------------------------------------------------

    def run(self, msg):
        """Runs one exec (a codeexec_protocol.Exec) and sends its done."""
        exec_id, limit = msg.id, msg.limit
        self.chan.exec_id = exec_id
        codeexec_interrupt.clear()  # a SIGINT while idle belongs to no exec
        token = os.urandom(12).hex().encode()
        ok, exit_code, error = False, 1, ""
        # Threads already running belong to earlier execs: mute them before
        # fds 1/2 lead to this exec's pipes.
        codeexec_stdio.begin_exec()
        self.shower.begin(exec_id, msg.display)
        try:
            # Each exec starts with fds 1/2 and sys.stdout/err writing to its
            # own capture pipes, whatever the previous exec did to them.
            self.capture.begin(exec_id, limit, msg.budget)
        except (OSError, RuntimeError) as exc:
            # E.g. user code used up every descriptor or thread. Still run the code, so
            # that it can repair things, but say that its output is lost.
            self.chan.send_out(exec_id, "stderr", "sandbox agent: cannot capture the output of "
                               "this call (%s); it is lost\n" % exc)
        try:
            codeexec_stdio.fix()
            ok, exit_code, error = self._execute(msg)
        finally:
            if os.getpid() != self.pid:
                self._leave_forked_child(exit_code)
            # Even if something above failed (a SIGINT at the wrong moment),
            # the exec must end with a fence and a done.
            end = codeexec_runtime.take_end()
            files = self._out_files()
            self.chan.send_done(exec_id, ok, exit_code, error, self._fence(token), end=end, files=files)
        # After the result is out, so that it costs the call nothing.
        if msg.checkpoint and not end:
            self.durable.checkpoint(exec_id, msg.checkpoint, msg.workspace)

    def _out_files(self):
        try:
            return self.outfiles.changed()
        except Exception:  # noqa: BLE001 - never in the way of the done
            return [], 0

    @staticmethod
    def _leave_forked_child(code):
        """A child made by os.fork() in user code got back into the agent
        (its code ended instead of calling os._exit): end it here, or it
        would wait for execs forever."""
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code if isinstance(code, int) and 0 <= code <= 255 else 1)

    def _fence(self, token):
        codeexec_stdio.flush()
        dropped, late = self.capture.end(token, FENCE_TIMEOUT)
        for name in late:
            codeexec_channel.diag(self.chan.diag_fd, "fence on %s timed out" % name)
        return dropped

    def _configure(self, msg):
        proxies = codeexec_servers.configure(msg.servers, msg.discovered, msg.unloaded)
        ns = self.ns
        for name, obj in self.installed.items():
            if name.startswith("mcp_") and ns.get(name) is obj:
                del ns[name]
        installed = {"mcp_" + alias: p for alias, p in proxies.items()}
        by_name = {p._meta["name"]: p for p in proxies.values()}
        ns.update(installed)
        # The other configured servers' names say how to load them; a name
        # the code uses for something of its own stays its own.
        stubs = codeexec_servers.unloaded_proxies(installed)
        for name, stub in stubs.items():
            if name not in ns:
                ns[name] = installed[name] = stub
        ns["mcp_servers"] = by_name
        ns["LOADED_MCP_SERVERS"] = tuple(by_name)
        self.installed = installed
        helpers = dict(self.extra)
        helpers.update(stubs)
        helpers.update(installed)
        helpers["mcp_servers"] = by_name
        helpers["LOADED_MCP_SERVERS"] = ns["LOADED_MCP_SERVERS"]
        helpers["runtime"] = self.runtime
        codeexec_persist.set_helpers(helpers)

    def _event_loop(self):
        import asyncio

        loop = self.loop
        if loop is None or loop.is_closed():
            loop = self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        return loop

    def _execute(self, msg):
        """Runs one exec's code. Returns (ok, exit code, error)."""
        self.cells += 1
        filename = "<cell-%d>" % self.cells
        source = msg.code
        try:
            self._configure(msg)
            if msg.first:
                codeexec_persist.bind_saved_tools(self.ns, msg.saved_tools)
            codeexec_source.register(filename, source)
            self.durable.add_cell(filename, source)
            code, last = _split_last(source, filename)
            codeexec_interrupt.deliver()  # a SIGINT during the set-up above
            value = self._run_cell(code, last)
            if last is not None:
                self.shower.show(value, last=True)
            # As a notebook's inline backend does: the figures still open
            # are shown and closed.
            self.shower.show_figures()
        except SystemExit as exc:
            return self._exit(exc)
        except BaseException as exc:  # noqa: BLE001 - every user failure is reported, not raised
            self._print_exception(exc)
            return False, 1, _describe(exc)
        return True, 0, ""

    def _run_cell(self, code, last):
        """Runs a cell's code, then its last expression (None: there is
        none); returns the expression's value."""
        if (code.co_flags | (last.co_flags if last else 0)) & CO_COROUTINE or "asyncio" in sys.modules:
            # A cell with top-level await runs as one coroutine. Once
            # asyncio is in use, every cell runs inside the session's
            # event loop, as in Jupyter (and upstream): create_task and
            # get_running_loop work, and earlier tasks make progress.
            return self._run_coroutine(_in_loop(code, last, self.ns))
        eval(code, self.ns)
        return None if last is None else eval(last, self.ns)

    def _run_coroutine(self, coro):
        loop = self._event_loop()
        task = loop.create_task(coro)
        try:
            _drive(loop, task)
        except BaseException:
            # Interrupted while the loop waited (SIGINT): do not let the cell
            # resume inside a later exec.
            if not task.done():
                task.cancel()
            raise
        return task.result()

    def _exit(self, exc):
        code = exc.code
        if code is None:
            n = 0
        elif isinstance(code, int):
            # sandboxd carries the exit code as an int32.
            n = int(code) if -(1 << 31) <= code < (1 << 31) else 1
        else:
            try:
                print(code, file=sys.stderr)
            except Exception:  # noqa: BLE001
                pass
            n = 1
        return n == 0, n, "" if n == 0 else _describe(exc)

    def _print_exception(self, exc):
        try:
            import traceback

            _trim(exc, set())
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        except BaseException as err:  # noqa: BLE001
            text = "%s\n(traceback unavailable: %r)\n" % (_describe(exc), err)
        if isinstance(exc, RuntimeError) and "cannot be called from a running event loop" in str(exc):
            text += ("hint: cells run inside the session's event loop; use top-level "
                     "`await main()` instead of asyncio.run(main())\n")
        elif type(exc) is NameError and codeexec_persist.bind_late(getattr(exc, "name", None)):
            text += ("hint: %s is a tool saved after this session began (in another session or another "
                     "codeexec); it is bound now, so run the code again (it is also user_tools.%s)\n"
                     % (exc.name, exc.name))
        codeexec_stdio.flush()
        try:
            sys.__stderr__.write(text)
            sys.__stderr__.flush()
        except Exception:  # noqa: BLE001
            try:
                os.write(2, text.encode("utf-8", "backslashreplace"))
            except OSError:
                pass
