"""The fork server's requests (request.go encodes them)."""

import _socket
import sys


def fds_of(ancillary):
    """The descriptors an SCM_RIGHTS message brought."""
    fds = []
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += [int.from_bytes(payload[i:i + 4], sys.byteorder) for i in range(0, len(payload) - 3, 4)]
    return fds


def _rlimits(t, i):
    """The rlimits whose count is t[i], and the index after them."""
    n = int(t[i])
    return [(int(t[i + 1 + 2 * k]), int(t[i + 2 + 2 * k])) for k in range(n)], i + 1 + 2 * n


class Request:
    """One sandbox to start: fields are NUL-separated (request.go, encode),
    descriptors come with it: stdio (not for a spare, which gets it when it
    is released), the report socket, the agent directory's mount tree when
    the request brings one, then the cgroups' files."""

    def __init__(self, data, fds):
        t = data.split(b"\0")
        self.hold = t[0] == b"hold1"  # a spare: PID 2 waits for its command
        n_stdio = 0 if self.hold else 3
        if t[0] not in (b"fork1", b"hold1") or len(fds) < n_stdio + 1:
            raise ValueError("bad request")
        self._command(t[1:])
        agent = t[2]
        self.tmp, self.workspace = int(t[3]), int(t[4])
        self.rlimits, i = _rlimits(t, 5)
        self.ns_rlimits, _ = _rlimits(t, i)  # set inside the sandbox's user namespace
        self.stdio, self.report = fds[:n_stdio], fds[n_stdio]
        self.err = self.stdio[2] if self.stdio else 2  # a spare's set-up reports to the server's log
        self.agent = agent  # b"" none, b"server" the server's, b"tree" the descriptor
        rest = fds[n_stdio + 1:]
        self.tree = rest[0] if agent == b"tree" else -1
        self.cgroups = rest[1:] if agent == b"tree" else rest
        self.held = -1  # a spare's end of the socket its release comes on

    def _command(self, t):
        """Reads the mode, command and environment, which end t[0], t[1:]."""
        self.mode = t[0]
        i = 5 + 2 * int(t[4])
        i += 1 + 2 * int(t[i])
        n = int(t[i])
        self.argv = t[i + 1:i + 1 + n]
        i += 1 + n
        n = int(t[i])
        self.env = t[i + 1:i + 1 + 2 * n]

    def release(self, data, fds):
        """Takes a spare's release: its command and its stdio."""
        t = data.split(b"\0")
        if t[0] != b"go1" or len(fds) != 3:
            raise ValueError("bad release")
        self._command(t[2:])
        self.stdio = fds
