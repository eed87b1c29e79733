package migrate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/codeexec/codeexec/memoryd/internal/shared"
)

// BackupTarget is where a backup goes, checked before memoryd is asked for
// one (CheckBackupTarget): a backup that cannot be written, or would cut a
// process off from the database it uses, is refused before anything is
// opened, written or renamed.
type BackupTarget struct {
	// path is the FILE as given, for messages.
	path string
	// file is what is written: path with its symlinks followed, or path
	// itself for a stream.
	file string
	// stream is set for a device, a pipe or a socket, and for a
	// descriptor of an open file (/dev/stdout, /dev/fd/N): the bytes go
	// there as memoryd sends them, with no temporary file to rename.
	stream bool
	// regular is set for a stream that is a regular file (a descriptor
	// of one), which is appended to and synced.
	regular bool
}

// maxLinks bounds the symlinks followed, as Linux's MAXSYMLINKS does.
const maxLinks = 40

// procFD matches a resolved /proc/self/fd (or /proc/thread-self/fd): its
// entries are symlinks to open files, some of them (pipes, sockets) with
// no path.
var procFD = regexp.MustCompile(`^/proc/[0-9]+(/task/[0-9]+)?/fd$`)

// CheckBackupTarget checks that path can take a backup of the bbolt file
// live, the database backed up (empty when it is not known here: a
// remote memoryd, or PostgreSQL):
//
//   - A regular file must be neither live, by any name (a symlink, a hard
//     link), nor a file that another process holds locked, as a running
//     memoryd holds its database: a backup renamed over it would leave that
//     process writing to a file that is gone at its next start.
//   - A symlink is followed: the backup replaces the file it points to
//     (creating it if need be), and the link stays.
//   - A device, a pipe, a socket or a descriptor of an open file
//     (/dev/stdout) gets the backup as it streams, so that `codeexec memoryd
//     backup /dev/stdout | gzip` works.
//   - Otherwise the directory that will hold the file must exist: none is
//     created.
func CheckBackupTarget(path, live string) (*BackupTarget, error) {
	if path == "" {
		return nil, errors.New("backup: the file to write is empty; name a new file, an old backup to replace, or /dev/stdout")
	}
	t := &BackupTarget{path: path, file: path}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return nil, fmt.Errorf("backup: %s is a directory; name a file to write, e.g. %s", path, filepath.Join(path, "codeexec-backup.db"))
	case err == nil && !fi.Mode().IsRegular():
		t.stream = true
		return t, nil
	case err == nil:
		if err := checkNotInUse(path, fi, live); err != nil {
			return nil, err
		}
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
		// followLinks names a missing directory, or a file in its
		// place.
		return nil, fmt.Errorf("backup to %s: %w", path, err)
	}
	file, fd, err := followLinks(path)
	if err != nil {
		return nil, err
	}
	if fd {
		t.stream, t.regular = true, true
		return t, nil
	}
	t.file = file
	return t, nil
}

// checkNotInUse refuses the regular file path (fi) when it is the
// database live or a file another process holds locked.
func checkNotInUse(path string, fi fs.FileInfo, live string) error {
	if live != "" {
		if lfi, err := os.Stat(live); err == nil && os.SameFile(fi, lfi) {
			name := path
			if path != live {
				name = fmt.Sprintf("%s (the same file as %s)", path, live)
			}
			return fmt.Errorf("backup: %s is the memory database being backed up; a backup written over it would cut off every codeexec using it, and their later writes would be lost; nothing was written: name another file, e.g. %s",
				name, suggestBackupName(live))
		}
	}
	held, holder, err := shared.HeldBy(path)
	if err != nil {
		return fmt.Errorf("backup to %s: %w", path, err)
	}
	if held {
		return fmt.Errorf("backup: %s is a database in use: %s holds it locked, as a running codeexec holds its memory database; a backup written over it would cut that process off, and its later writes would be lost; nothing was written: name a file that no process holds, or stop %s first",
			path, holder, holder)
	}
	return nil
}

// suggestBackupName is a file beside the database db for a backup of it.
func suggestBackupName(db string) string {
	base := filepath.Base(db)
	return filepath.Join(filepath.Dir(db), strings.TrimSuffix(base, filepath.Ext(base))+"-backup"+filepath.Ext(base))
}

// followLinks returns the file that path names once its symlinks are
// followed; the last link may point to a file not yet there. fd is set
// when a link is an entry of /proc/self/fd (as /dev/stdout is), which
// stands for an open file rather than names a place to rename a file
// onto.
func followLinks(orig string) (file string, fd bool, err error) {
	path, err := filepath.Abs(orig)
	if err != nil {
		return "", false, fmt.Errorf("backup to %s: %w", orig, err)
	}
	// named names the file for an error: orig, and where its links led.
	first := path
	named := func() string {
		if path == first {
			return orig
		}
		return fmt.Sprintf("%s (where the symlink %s leads)", path, orig)
	}
	for range maxLinks {
		dir, err := filepath.EvalSymlinks(filepath.Dir(path))
		if errors.Is(err, fs.ErrNotExist) {
			return "", false, fmt.Errorf("backup: cannot write %s: the directory %s does not exist; create it first (backup creates no directory), or name a file in a directory that exists",
				named(), filepath.Dir(path))
		}
		if err != nil {
			return "", false, fmt.Errorf("backup to %s: %w", orig, err)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return "", false, fmt.Errorf("backup: cannot write %s: %s is not a directory; name a file in a directory", named(), filepath.Dir(path))
		}
		path = filepath.Join(dir, filepath.Base(path))
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Mode()&fs.ModeSymlink == 0) {
			return path, false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("backup to %s: %w", orig, err)
		}
		if procFD.MatchString(dir) {
			return path, true, nil
		}
		link, err := os.Readlink(path)
		if err != nil {
			return "", false, fmt.Errorf("backup to %s: %w", orig, err)
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(dir, link)
		}
		path = link
	}
	return "", false, fmt.Errorf("backup: cannot write %s: more than %d symlinks to follow; name the file itself", orig, maxLinks)
}

// Streamed reports whether the backup goes to a device, a pipe or an open
// descriptor (/dev/stdout) as it comes, rather than to a file renamed
// into place: a caller then prints nothing to stdout, which may be where
// the backup is going.
func (t *BackupTarget) Streamed() bool { return t.stream }
