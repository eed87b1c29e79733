package container

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// staleAfter is how long an exited container of another owner is left
// alone: its owner may still be about to inspect and remove it.
const staleAfter = time.Minute

// reapOrphans removes containers labelled as codeexec's that nobody will
// clean up:
//   - at Close (all), every container this engine owns;
//   - containers of an earlier sandboxd on this host: same hostname, other
//     instance, and a PID that is gone or is now this process's own (PID 1
//     in a container restarted under the same hostname), unless that owner
//     is another engine still open in this process;
//   - exited containers of any owner, finished more than staleAfter ago
//     (a sandboxd elsewhere, e.g. a compose replica, that died).
//
// Errors are logged: reaping is housekeeping.
func (c *Engine) reapOrphans(ctx context.Context, all bool) {
	out, err := c.cli(ctx, "ps", "-a", "-q", "--no-trunc", "--filter", "label="+LabelOwner)
	if err != nil {
		c.logger.Warn("could not list containers for orphan reaping", "error", err)
		return
	}
	ids := strings.Fields(out)
	if len(ids) == 0 {
		return
	}
	out, err = c.inspectExisting(ctx, ids)
	if err != nil {
		c.logger.Warn("could not inspect containers for orphan reaping", "error", err)
		return
	}
	var doomed []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 4 {
			continue
		}
		name := strings.TrimPrefix(f[0], "/")
		if c.orphan(f[1], f[2], f[3], all, time.Now()) {
			doomed = append(doomed, name)
		}
	}
	if len(doomed) == 0 {
		return
	}
	c.logger.Info("removing orphaned sandbox containers", "count", len(doomed), "names", strings.Join(doomed, " "))
	if _, err := c.cli(ctx, append([]string{"rm", "-f"}, doomed...)...); err != nil {
		c.logger.Warn("could not remove orphaned containers", "error", err)
	}
}

// inspectExisting inspects the containers ids for reapOrphans. A container
// can go between the listing and the inspection (its owner removed it),
// and podman then inspects none of them: the ones its error names as not
// found are dropped and the rest inspected again. docker prints the ones
// it found and fails for the others, which is taken as it is.
func (c *Engine) inspectExisting(ctx context.Context, ids []string) (string, error) {
	for {
		out, err := c.cli(ctx, append([]string{"inspect", "--format",
			`{{.Name}}|{{index .Config.Labels "` + LabelOwner + `"}}|{{.State.Status}}|{{.State.FinishedAt}}`}, ids...)...)
		if err == nil || out != "" {
			return out, nil
		}
		msg := strings.ToLower(err.Error())
		if !strings.Contains(msg, "no such") {
			return "", err
		}
		left := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return strings.Contains(msg, strings.ToLower(id)) })
		if len(left) == len(ids) {
			return "", err // none named: not the race
		}
		if len(left) == 0 {
			return "", nil
		}
		ids = left
	}
}

// orphan decides for one container (see reapOrphans).
func (c *Engine) orphan(owner, state, finished string, all bool, now time.Time) bool {
	if owner == c.owner {
		return all
	}
	if _, open := liveOwners.Load(owner); open {
		return false // another engine of this process
	}
	host, rest, _ := strings.Cut(owner, "/")
	pidStr, _, _ := strings.Cut(rest, "/")
	if host == c.host {
		pid, err := strconv.Atoi(pidStr)
		if err == nil && (pid == os.Getpid() || !ownerAlive(pid)) {
			return true
		}
	}
	if state == "exited" || state == "dead" {
		t, err := time.Parse(time.RFC3339Nano, finished)
		if err != nil {
			// podman prints "2006-01-02 15:04:05.999999999 -0700 MST".
			t, err = time.Parse("2006-01-02 15:04:05.999999999 -0700 MST", finished)
		}
		return err == nil && now.Sub(t) > staleAfter
	}
	return false
}

// ownerAlive reports whether pid exists (signal 0).
func ownerAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
