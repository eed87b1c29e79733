"""The workspace as part of the session's checkpoint.

/workspace (the agent's first working directory) is kept with the
variables: each checkpoint lists its files, folders and symbolic links,
and a file's content travels as chunks of at most PIECE bytes named by
their BLAKE2b-128, as values do, so that only what changed is sent. A
file whose size, mtime, ctime and inode are those of the last checkpoint
is not read again. Files are taken smallest first until the workspace's
cap; the rest are named in the manifest's unsaved list, so the result
and the restore notice say which files are not kept.

A restore writes the files back before the values are loaded, with their
mode and mtime, and reports their paths.
"""

import os
import stat

# One chunk of a file: small enough that a change to a large file sends
# a few of them, large enough that a file is a handful of store writes.
PIECE = 4 << 20
# The most files, folders and links a checkpoint lists.
MAX_ENTRIES = 20000
ROOT = "/workspace"


def _human(n):
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return ("%d %s" % (n, unit)) if unit == "bytes" else ("%.1f %s" % (n, unit))
        n /= 1024.0


def _show(rel):
    return ROOT + "/" + rel


class Workspace:
    def __init__(self, root):
        self.root = root
        # rel -> ((size, mtime_ns, ctime_ns, ino), [chunk ids]) of the
        # files of the last snapshot, so that unchanged files are not read.
        self._known = {}

    def snapshot(self, cap, stored, chunks):
        """The manifest's part for the workspace, {"files", "dirs",
        "links"}, its bytes, and the unsaved entries of files over cap.
        New chunks (not in stored) go into chunks."""
        import hashlib

        found, dirs, links, unsaved = self._walk()
        found.sort(key=lambda f: (f[1].st_size, f[0]))
        files, known, total = {}, {}, 0
        for rel, st in found:
            if total + st.st_size > cap:
                unsaved.append({"name": _show(rel), "type": "file of %s" % _human(st.st_size),
                                "why": "the workspace's files are over its %s checkpoint cap; remove what is no "
                                       "longer needed, or raise CODEEXEC_WORKSPACE_CHECKPOINT_BYTES" % _human(cap)})
                continue
            key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            prev = self._known.get(rel)
            if prev is not None and prev[0] == key and all(c in stored or c in chunks for c in prev[1]):
                ids = prev[1]
            else:
                try:
                    ids = self._read(rel, hashlib, stored, chunks)
                except OSError as exc:  # vanished or unreadable since the walk
                    unsaved.append({"name": _show(rel), "type": "file", "why": exc.strerror or str(exc)})
                    continue
            known[rel] = (key, ids)
            files[rel] = {"chunks": ids, "bytes": st.st_size, "mode": stat.S_IMODE(st.st_mode),
                          "mtime": st.st_mtime_ns}
            total += st.st_size
        self._known = known
        return {"files": files, "dirs": dirs, "links": links}, total, unsaved

    def _walk(self):
        found, dirs, links, unsaved = [], [], {}, []
        n = 0
        stack = [""]
        while stack:
            top = stack.pop()
            try:
                it = os.scandir(os.path.join(self.root, top) if top else self.root)
            except OSError:
                continue
            with it:
                for e in it:
                    rel = top + "/" + e.name if top else e.name
                    n += 1
                    if n > MAX_ENTRIES:
                        unsaved.append({"name": _show(rel), "type": "file",
                                        "why": "the workspace holds more than %d entries; the rest are not kept" % MAX_ENTRIES})
                        return found, dirs, links, unsaved
                    try:
                        if e.is_symlink():
                            links[rel] = os.readlink(e.path)
                        elif e.is_dir(follow_symlinks=False):
                            dirs.append(rel)
                            stack.append(rel)
                        elif e.is_file(follow_symlinks=False):
                            found.append((rel, e.stat(follow_symlinks=False)))
                    except OSError:
                        continue
        dirs.sort()
        return found, dirs, links, unsaved

    def _read(self, rel, hashlib, stored, chunks):
        ids = []
        fd = os.open(os.path.join(self.root, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            while True:
                data = _read_piece(fd)
                if not data:
                    break
                cid = hashlib.blake2b(data, digest_size=16).hexdigest()
                if cid not in stored:
                    chunks[cid] = data
                ids.append(cid)
                if len(data) < PIECE:
                    break
        finally:
            os.close(fd)
        return ids

    def restore(self, part, chunks):
        """Writes the manifest's workspace back; returns (paths restored,
        [{"name", "why"}] failed)."""
        restored, failed = [], []
        for rel in part.get("dirs") or ():
            path = self._inside(rel)
            if path is None:
                continue
            try:
                os.makedirs(path, exist_ok=True)
            except OSError as exc:
                failed.append({"name": _show(rel), "why": exc.strerror or str(exc)})
        known = {}
        for rel, f in sorted((part.get("files") or {}).items()):
            path = self._inside(rel)
            if path is None:
                failed.append({"name": _show(rel), "why": "not a path inside the workspace"})
                continue
            missing = [c for c in f.get("chunks", ()) if c not in chunks]
            if missing:
                failed.append({"name": _show(rel), "why": "its saved content is missing"})
                continue
            try:
                self._write(path, f, chunks)
                st = os.stat(path, follow_symlinks=False)
            except OSError as exc:
                failed.append({"name": _show(rel), "why": exc.strerror or str(exc)})
                continue
            known[rel] = ((st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino), list(f["chunks"]))
            restored.append(_show(rel))
        for rel, target in sorted((part.get("links") or {}).items()):
            path = self._inside(rel)
            if path is None:
                continue
            try:
                os.symlink(target, path)
                restored.append(_show(rel))
            except OSError as exc:
                failed.append({"name": _show(rel), "why": exc.strerror or str(exc)})
        self._known = known
        return restored, failed

    def _inside(self, rel):
        if not isinstance(rel, str) or not rel or rel.startswith("/") or ".." in rel.split("/"):
            return None
        return os.path.join(self.root, rel)

    @staticmethod
    def _write(path, f, chunks):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            for c in f.get("chunks", ()):
                data = memoryview(chunks[c])
                while data:
                    n = os.write(fd, data)
                    data = data[n:]
            os.fchmod(fd, int(f.get("mode", 0o644)) & 0o777)
        finally:
            os.close(fd)
        mtime = f.get("mtime")
        if isinstance(mtime, int):
            os.utime(path, ns=(mtime, mtime), follow_symlinks=False)


def _read_piece(fd):
    parts, n = [], 0
    while n < PIECE:
        data = os.read(fd, PIECE - n)
        if not data:
            break
        parts.append(data)
        n += len(data)
    return b"".join(parts)


def chunk_ids(part):
    """The chunk ids a manifest's workspace part names."""
    ids = set()
    for f in ((part or {}).get("files") or {}).values():
        ids.update(f.get("chunks", ()))
    return ids


# Files under /workspace/out come back with the result as resource links.
OUT = "out"
# The most files one result names; the most bytes one file may have to be
# named (resources/read returns it whole).
OUT_FILES = 20
OUT_FILE_BYTES = 8 << 20


class OutFiles:
    """Finds the files under out/ that an exec made or changed."""

    def __init__(self, root):
        self.root = root
        self._seen = {}  # rel -> (size, mtime_ns, ctime_ns, ino)

    def changed(self):
        """[{"path", "bytes", "mime"}] of the files new or changed since the
        last call, at most OUT_FILES, and how many more there were."""
        seen, found = {}, []
        top = os.path.join(self.root, OUT)
        stack = [""]
        n = 0
        while stack and n < MAX_ENTRIES:
            sub = stack.pop()
            try:
                it = os.scandir(os.path.join(top, sub) if sub else top)
            except OSError:
                continue
            with it:
                for e in it:
                    n += 1
                    rel = OUT + "/" + (sub + "/" + e.name if sub else e.name)
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(rel[len(OUT) + 1:])
                            continue
                        if not e.is_file(follow_symlinks=False):
                            continue
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                    seen[rel] = key
                    if self._seen.get(rel) != key:
                        found.append((rel, st.st_size))
        self._seen = seen
        if not found:
            return [], 0
        import mimetypes

        found.sort()
        out = [{"path": rel, "bytes": size, "mime": mimetypes.guess_type(rel)[0] or "application/octet-stream"}
               for rel, size in found[:OUT_FILES]]
        return out, len(found) - len(out)

    def forget(self, rel, key):
        """Notes a file as seen (a restored one), so that it is not named
        as made by the next exec."""
        self._seen[rel] = key

    def seen_all(self):
        """Notes every file there is now as seen."""
        self.changed()
