package shared

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ownerInfo is what the owner writes beside the database, so that the
// other processes can name it: in logs, and in the error they give when
// they cannot talk to it.
type ownerInfo struct {
	PID      int       `json:"pid"`
	Version  string    `json:"version"`
	Protocol string    `json:"protocol"`
	Socket   string    `json:"socket"`
	Since    time.Time `json:"since"`
}

// OwnerPath is the owner file beside the database.
func OwnerPath(db string) string { return db + ".owner" }

// writeOwner replaces the owner file atomically.
func writeOwner(db string, info ownerInfo) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	tmp := OwnerPath(db) + "." + strconv.Itoa(info.PID) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write owner file: %w", err)
	}
	if err := os.Rename(tmp, OwnerPath(db)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write owner file: %w", err)
	}
	return nil
}

// readOwner reads the owner file; ok is false when there is none or it
// cannot be parsed.
func readOwner(db string) (ownerInfo, bool) {
	b, err := os.ReadFile(OwnerPath(db))
	if err != nil {
		return ownerInfo{}, false
	}
	var info ownerInfo
	if json.Unmarshal(b, &info) != nil || info.PID <= 0 {
		return ownerInfo{}, false
	}
	return info, true
}

// removeOwner removes the owner file if it still names this process.
func removeOwner(db string) {
	if info, ok := readOwner(db); ok && info.PID == os.Getpid() {
		_ = os.Remove(OwnerPath(db))
	}
}

// lockHolder finds the process that holds a flock on path, from
// /proc/locks. It returns 0 when it cannot tell (another PID namespace, a
// file system without local locks).
func lockHolder(path string) int {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	dev := uint64(st.Dev) //nolint:unconvert // Stat_t.Dev is not a uint64 on every GOARCH
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), st.Ino)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 12345 08:01:1234567 0 EOF"
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" {
			continue
		}
		if fields[5] == want {
			pid, _ := strconv.Atoi(fields[4])
			return pid
		}
	}
	return 0
}

// HeldBy reports whether a process holds path's lock, as the owner of a
// bbolt database does, and names that process when /proc/locks tells
// which it is ("another process" when not). It takes the lock for an
// instant to find out, and leaves path as it was; a path that does not
// exist, or whose file system has no flock, is held by nobody.
func HeldBy(path string) (held bool, holder string, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, "", nil
	}
	if err != nil {
		return false, "", err
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		if pid := lockHolder(path); pid > 0 {
			return true, describeProcess(pid), nil
		}
		return true, "another process", nil
	}
	// Any other failure is a file system without flock (or one that
	// refuses it), where bbolt cannot lock, so no database is held; and
	// closing f releases the lock taken.
	return false, "", nil
}

// alive reports whether pid names a running process.
func alive(pid int) bool {
	return pid > 0 && (syscall.Kill(pid, 0) == nil || syscall.Kill(pid, 0) == syscall.EPERM)
}

// describeProcess names a process for an error message: its command and,
// when it is a codeexec, the version it reports. A codeexec from before
// shared state dirs writes no owner file, so asking its binary is the only
// way to name its version.
func describeProcess(pid int) string {
	exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	name := strings.TrimSuffix(filepath.Base(exe), " (deleted)")
	if name == "" || name == "." {
		return "pid " + strconv.Itoa(pid)
	}
	if !strings.Contains(name, "codeexec") {
		return fmt.Sprintf("pid %d (%s)", pid, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// /proc/PID/exe runs the very binary the process runs, even when its
	// file was since replaced by an upgrade.
	out, err := exec.CommandContext(ctx, "/proc/"+strconv.Itoa(pid)+"/exe", "version").Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return fmt.Sprintf("pid %d (%s)", pid, v)
	}
	return fmt.Sprintf("pid %d (%s)", pid, name)
}
