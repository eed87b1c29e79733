// Package tempdir makes the scratch directories a sandboxd process keeps
// for its life (the agent's files, the fork server's), and removes the
// ones that a killed process left behind. A directory is this process's
// while the lock file beside it, its name with ".lock", is locked (flock):
// the kernel drops the lock when the process ends, however it ends.
package tempdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is a directory this process holds.
type Dir struct {
	// Path is the directory's path.
	Path string
	lock *os.File
}

// Make removes what killed processes left of prefix's directories in root
// (os.TempDir() when root is ""), then makes a new one, as os.MkdirTemp
// does, and holds it. A directory without a lock file (made before this
// package, or by something else) is left alone.
func Make(root, prefix string) (*Dir, error) {
	if root == "" {
		root = os.TempDir()
	}
	RemoveStale(root, prefix)
	for {
		lock, err := os.CreateTemp(root, prefix+"*.lock")
		if err != nil {
			return nil, err
		}
		// Another process's sweep may take the file between its creation
		// and the lock: while it holds the lock, and once it has unlinked
		// the file, a new name is tried.
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if errors.Is(err, unix.EWOULDBLOCK) {
			_ = lock.Close()
			continue
		}
		if err != nil {
			_ = lock.Close()
			return nil, fmt.Errorf("lock %s: %w", lock.Name(), err)
		}
		if !samePath(lock) {
			_ = lock.Close()
			continue
		}
		d := &Dir{Path: strings.TrimSuffix(lock.Name(), ".lock"), lock: lock}
		if err := os.Mkdir(d.Path, 0o700); err != nil {
			_ = os.Remove(lock.Name())
			_ = lock.Close()
			return nil, err
		}
		return d, nil
	}
}

// samePath reports whether f's name still names f.
func samePath(f *os.File) bool {
	byName, err := os.Stat(f.Name())
	if err != nil {
		return false
	}
	byFile, err := f.Stat()
	return err == nil && os.SameFile(byName, byFile)
}

// Remove deletes the directory and its lock file.
func (d *Dir) Remove() error {
	err := os.RemoveAll(d.Path)
	if rerr := os.Remove(d.lock.Name()); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return errors.Join(err, d.lock.Close())
}

// RemoveStale deletes prefix's directories in root whose lock file no
// process holds, with their lock files.
func RemoveStale(root, prefix string) {
	locks, _ := filepath.Glob(filepath.Join(root, prefix+"*.lock"))
	for _, name := range locks {
		lock, err := os.Open(name)
		if err != nil {
			continue
		}
		if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil && samePath(lock) {
			// The directory goes first: while the lock file is there, no
			// Make can take its name for a new one.
			_ = os.RemoveAll(strings.TrimSuffix(name, ".lock"))
			_ = os.Remove(name)
		}
		_ = lock.Close()
	}
}
