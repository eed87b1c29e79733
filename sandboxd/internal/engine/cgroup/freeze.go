package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// freezeWait bounds how long Freeze waits for every process of the group
// to stop: a task in an uninterruptible sleep (a page fault on a slow
// disk, a network file system) holds the freeze off until it wakes.
const freezeWait = 2 * time.Second

// ErrNoFreezer means the group has no freezer: the v1 freezer controller is
// not mounted or not usable here.
var ErrNoFreezer = errors.New("no cgroup freezer for the sandbox (the v1 freezer controller is not mounted or not usable)")

// Freeze stops every process of the group where it is, threads and
// children included, until Thaw: the cgroup v2 freezer (cgroup.freeze) or
// the v1 freezer controller. A frozen process runs no code and cannot
// notice that it was stopped; a process it forks joins the freeze. It
// returns once the kernel reports the group frozen, or an error (and the
// group thawed) when that does not happen within freezeWait.
func (g *Group) Freeze() error {
	file, want, err := g.freezer(true)
	if err != nil {
		return err
	}
	g.fmu.Lock()
	defer g.fmu.Unlock()
	if g.killed {
		return errors.New("the sandbox is being stopped")
	}
	deadline := time.Now().Add(freezeWait)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		// v1 may stay FREEZING when a task could not be stopped at the
		// first try; writing FROZEN again retries those.
		if err := writeFile(file, want); err != nil {
			g.thawLocked()
			return fmt.Errorf("freeze the sandbox's cgroup: %w", err)
		}
		if g.isFrozen() {
			return nil
		}
		if time.Now().After(deadline) {
			g.thawLocked()
			return fmt.Errorf("the sandbox's processes did not all stop within %s", freezeWait)
		}
		time.Sleep(delay)
	}
}

// Thaw lets the processes of a frozen group run on. Thawing a group that
// is not frozen, or is gone, does nothing.
func (g *Group) Thaw() error {
	file, value, err := g.freezer(false)
	if err != nil {
		return err
	}
	g.fmu.Lock()
	defer g.fmu.Unlock()
	if err := writeFile(file, value); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("thaw the sandbox's cgroup: %w", err)
	}
	return nil
}

// thawLocked undoes a freeze that failed. On fmu.
func (g *Group) thawLocked() {
	if file, value, err := g.freezer(false); err == nil {
		_ = writeFile(file, value)
	}
}

// freezer returns the file that freezes or thaws the group and what to
// write to it.
func (g *Group) freezer(freeze bool) (file, value string, err error) {
	switch {
	case g == nil:
		return "", "", ErrNoFreezer
	case g.v2:
		value = "0"
		if freeze {
			value = "1"
		}
		return filepath.Join(g.dirs[""], "cgroup.freeze"), value, nil
	case g.dirs["freezer"] != "":
		value = "THAWED"
		if freeze {
			value = "FROZEN"
		}
		return filepath.Join(g.dirs["freezer"], "freezer.state"), value, nil
	}
	return "", "", ErrNoFreezer
}

// isFrozen reports whether the kernel has stopped every process of the
// group: "frozen 1" in v2's cgroup.events, FROZEN in v1's freezer.state
// (FREEZING while some are not yet stopped).
func (g *Group) isFrozen() bool {
	if g.v2 {
		return readKeyed(filepath.Join(g.dirs[""], "cgroup.events"), "frozen") == 1
	}
	b, err := os.ReadFile(filepath.Join(g.dirs["freezer"], "freezer.state"))
	return err == nil && strings.TrimSpace(string(b)) == "FROZEN"
}
