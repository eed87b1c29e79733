"""Says at once that the sandbox has no network.

The sandbox's network namespace has only loopback, so a connection to
anything else fails after a DNS timeout ("Temporary failure in name
resolution") or with a bare ENETUNREACH, which reads like a broken network
rather than a sandbox without one. This wraps the `socket` module's name
lookups and connects so that a non-loopback attempt raises at once with
an error that says so and names the way out: MCP servers. The isolation
itself is the kernel's; this only changes the message.

`socket` is patched when it is first imported, so the agent's start pays
nothing for it.
"""

import errno
import sys

MESSAGE = ("the sandbox has no network, so %s cannot be reached; MCP servers reach the outside: "
           "load one with run_python(code, servers=[\"name\"]) and call its tools "
           "(runtime.search_tool_docs(\"fetch a web page\") finds one)")

_LOCAL_NAMES = frozenset(("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"))


def _loopback(host, socket):
    """Whether host (a name or address, str or bytes) stays on loopback."""
    if host is None or host == "" or host == b"":
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return True  # not an address this wrapper understands: the kernel decides
    h = host.strip().lower().rstrip(".")
    if h in _LOCAL_NAMES or h.endswith(".localhost"):
        return True
    h = h.split("%", 1)[0]  # an IPv6 scope
    try:
        return socket.inet_pton(socket.AF_INET, h)[0] == 127
    except OSError:
        pass
    try:
        packed = socket.inet_pton(socket.AF_INET6, h)
    except OSError:
        return None  # a name, not an address
    return packed == b"\0" * 15 + b"\1" or packed[:12] == b"\0" * 10 + b"\xff\xff" and packed[12] == 127


def _unreachable(socket, what):
    return OSError(errno.ENETUNREACH, MESSAGE % what)


def patch(socket):
    """Wraps socket's lookups and socket.socket's connects."""
    if getattr(socket, "_codeexec_no_network", False):
        return
    socket._codeexec_no_network = True

    class NoNetworkError(socket.gaierror):
        """A name lookup in a sandbox without a network."""

    NoNetworkError.__module__ = "socket"
    real_getaddrinfo = socket.getaddrinfo
    real_gethostbyname = socket.gethostbyname
    real_gethostbyname_ex = socket.gethostbyname_ex

    def check_name(host):
        if not _loopback(host, socket):  # None (a name) or False (an address)
            shown = host.decode("ascii", "replace") if isinstance(host, bytes) else host
            raise NoNetworkError(socket.EAI_NONAME, MESSAGE % repr(shown))

    def getaddrinfo(host, port, *args, **kwargs):
        if _loopback(host, socket) is None:  # numeric addresses need no lookup
            check_name(host)
        return real_getaddrinfo(host, port, *args, **kwargs)

    def gethostbyname(host):
        check_name(host)
        return real_gethostbyname(host)

    def gethostbyname_ex(host):
        check_name(host)
        return real_gethostbyname_ex(host)

    def check_address(sock, address):
        if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple) or not address:
            return
        if not _loopback(address[0], socket):
            raise _unreachable(socket, "%s port %s" % (address[0], address[1] if len(address) > 1 else "?"))

    cls = socket.socket
    real_connect, real_connect_ex, real_sendto = cls.connect, cls.connect_ex, cls.sendto

    def connect(self, address):
        check_address(self, address)
        return real_connect(self, address)

    def connect_ex(self, address):
        check_address(self, address)
        return real_connect_ex(self, address)

    def sendto(self, data, *args):
        check_address(self, args[-1] if args else None)
        return real_sendto(self, data, *args)

    for name, fn in (("getaddrinfo", getaddrinfo), ("gethostbyname", gethostbyname),
                     ("gethostbyname_ex", gethostbyname_ex)):
        fn.__name__ = fn.__qualname__ = name
        fn.__doc__ = getattr(socket, name).__doc__
        setattr(socket, name, fn)
    for name, fn in (("connect", connect), ("connect_ex", connect_ex), ("sendto", sendto)):
        fn.__name__, fn.__qualname__ = name, "socket." + name
        fn.__doc__ = getattr(cls, name).__doc__
        setattr(cls, name, fn)


class _SocketFinder:
    """A sys.meta_path finder that patches `socket` as it is imported."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname != "socket":
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        real_exec = loader.exec_module

        class Loader:
            create_module = getattr(loader, "create_module", lambda spec: None)

            @staticmethod
            def exec_module(module):
                real_exec(module)
                patch(module)

        spec.loader = Loader()
        return spec


def install():
    """Patches socket now, if imported, or when it is."""
    mod = sys.modules.get("socket")
    if mod is not None:
        patch(mod)
        return
    sys.meta_path.insert(0, _SocketFinder)
