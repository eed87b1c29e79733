"""Durable sessions, the agent's part: a checkpoint after each exec that
sandboxd asks for, and restoring one into this (fresh) sandbox.

The checkpoint itself (what is saved and how) is codeexec_checkpoint; this
module feeds it the cells' sources, tells it which names are the agent's
own (helpers, proxies, saved tools bound by name) and speaks the channel
frames. codeexec_checkpoint is imported with the agent (agent modules
are importable only then) but imports what it needs (pickle, hashlib,
ast) at the first checkpoint or restore, so it costs a new sandbox almost
nothing.
"""

import os
import sys

import codeexec_checkpoint
import codeexec_persist
import codeexec_source
import codeexec_workspace

# Names the agent puts into every namespace; never part of a checkpoint.
_AGENT_NAMES = frozenset(("runtime", "mcp", "mcp_servers", "LOADED_MCP_SERVERS"))


class Durable:
    def __init__(self, session):
        self.session = session
        self.cells = []  # (filename, source) of every cell, in order
        self._defs = None
        self._checkpointer = None
        # The manifests sent and not yet answered, by exec ID. sandboxd
        # answers in order, but the answer to one checkpoint may come after
        # the next exec's checkpoint is on its way.
        self._pending = {}
        session.chan.on_checkpointed = self._on_checkpointed
        # The agent's first working directory, /workspace in a sandbox.
        self.workspace = codeexec_workspace.Workspace(os.getcwd())

    def add_cell(self, filename, source):
        self.cells.append((filename, source))
        if self._defs is not None:
            self._defs.add_cell(filename, source)

    def source_of(self, name, obj):
        """The source of the statement that made the session's function or
        class obj under name (save_tool carries it), or None."""
        if self._defs is None:
            self._defs = codeexec_checkpoint.Definitions()
            for filename, source in self.cells:
                self._defs.add_cell(filename, source)
        found = self._defs.source_of(name, obj)
        return found[1] if found else None

    def _skip(self, name, obj):
        s = self.session
        return (name in _AGENT_NAMES or s.extra.get(name) is obj or s.installed.get(name) is obj
                or codeexec_persist.bound_tool(name) is obj)

    def _ensure(self, cap, workspace_cap=0):
        if self._defs is None:
            self._defs = codeexec_checkpoint.Definitions()
            for filename, source in self.cells:
                self._defs.add_cell(filename, source)
        if self._checkpointer is None:
            self._checkpointer = codeexec_checkpoint.Checkpointer(self.session.ns, self._skip, self._defs, cap)
            self._checkpointer.workspace = self.workspace
        self._checkpointer.cap = cap
        self._checkpointer.workspace_cap = workspace_cap
        return codeexec_checkpoint

    def checkpoint(self, exec_id, cap, workspace_cap=0):
        """Takes a checkpoint of the namespace (and, with workspace_cap, of
        the workspace's files) and sends it; a state that cannot be
        checkpointed is reported instead."""
        try:
            ckpt = self._ensure(cap, workspace_cap)
            # A chunk that the store holds now may be deleted by a
            # checkpoint still on its way (sandboxd drops the chunks the
            # newer manifest no longer names), so only chunks that every
            # pending manifest names too may be left out.
            self._checkpointer.stored = self._safe(self._checkpointer.stored)
            try:
                manifest, chunks = self._checkpointer.snapshot()
            except ckpt.TooLarge as exc:
                self.session.chan.send_checkpoint(exec_id, None, {}, error=str(exc))
                return
        except Exception as exc:  # noqa: BLE001 - a checkpoint must never break the session
            self.session.chan.send_checkpoint(exec_id, None, {}, error="the checkpoint failed: %s: %s" % (type(exc).__name__, exc))
            return
        self._pending[exec_id] = manifest
        self.session.chan.send_checkpoint(exec_id, manifest, chunks)

    def _safe(self, chunks):
        """chunks, less those a pending checkpoint could make sandboxd
        delete: each pending manifest keeps only the chunks it names."""
        for m in list(self._pending.values()):
            chunks = chunks & codeexec_checkpoint.chunk_ids(m)
        return chunks

    def _on_checkpointed(self, msg):
        # On the reader thread, while the main thread may be taking the next
        # snapshot. dict.pop and one attribute store are atomic; every set
        # that snapshot may read (the older stored set narrowed by _safe, or
        # this one) holds only chunks no pending checkpoint deletes, so it
        # may send more than it needs to, never less.
        manifest = self._pending.pop(msg.get("id"), None)
        if msg.get("ok") and manifest is not None and self._checkpointer is not None:
            self._checkpointer.committed(manifest)
            self._checkpointer.stored = self._safe(self._checkpointer.stored)

    def restore(self, r):
        """Rebuilds the namespace from a codeexec_protocol.Restore and
        answers with the report."""
        try:
            ckpt = self._ensure(sys.maxsize)

            def on_source(filename, source):
                codeexec_source.register(filename, source)
                self.add_cell(filename, source)

            # A checkpoint that holds user_tools rebuilds it from the
            # saved tools the restore carried.
            with codeexec_persist.offered(r.saved_tools):
                report = ckpt.restore(self.session.ns, r.manifest or {}, r.chunks, on_source=on_source,
                                      workspace=self.workspace)
            # What was restored is stored already: the next checkpoint
            # sends only what changes.
            self._checkpointer.stored = ckpt.chunk_ids(r.manifest)
        except Exception as exc:  # noqa: BLE001 - reported to sandboxd, which starts fresh
            report = {"error": "%s: %s" % (type(exc).__name__, exc)}
        try:
            # Restored files under out/ were made by earlier calls.
            self.session.outfiles.seen_all()
        except Exception:  # noqa: BLE001
            pass
        self.session.chan.send_restored(report)
