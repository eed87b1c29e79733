package container

import (
	"bytes"
	"context"
	"maps"
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
//   - containers of an earlier sandboxd on this host: same PID namespace
//     (LabelPIDSpace: compose's replicas share the host's PIDs under host
//     names of their own) or same hostname, other instance, and a PID
//     that is gone, is now this process's own (PID 1 in a container
//     restarted under the same hostname), or is another process's (the
//     PID was reused: a busy host wraps round its 32,768 PIDs in
//     minutes): one whose start is not LabelOwnerStart or, for a
//     container without that label, one started after the container was
//     made; unless that owner is another engine still open in this
//     process. Such a container may be paused (its owner was cut off from
//     the session store, then died): nothing else would ever end it;
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
		if c.uids != nil {
			c.uids.listed(map[int]bool{})
		}
		return
	}
	out, err = c.inspectExisting(ctx, ids)
	if err != nil {
		c.logger.Warn("could not inspect containers for orphan reaping", "error", err)
		return
	}
	var doomed []string
	// uids are the host uids of the containers that stay; doomedUIDs
	// those of the ones removed below, which stay taken if that fails.
	uids, doomedUIDs := map[int]bool{}, map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 8 {
			continue
		}
		name := strings.TrimPrefix(f[0], "/")
		// A label a container lacks prints as "" or, where the engine
		// falls back to its raw JSON, "<no value>".
		for i := range f {
			if f[i] == "<no value>" {
				f[i] = ""
			}
		}
		uid, _ := strconv.Atoi(f[7])
		if c.orphan(listed{owner: f[1], pidSpace: f[2], ownerStart: f[3], state: f[4], finished: f[5], created: f[6]}, all, time.Now()) {
			doomed = append(doomed, name)
			doomedUIDs[uid] = true
		} else {
			uids[uid] = true
		}
	}
	if len(doomed) > 0 {
		c.logger.Info("removing orphaned sandbox containers", "count", len(doomed), "names", strings.Join(doomed, " "))
		if _, err := c.cli(ctx, append([]string{"rm", "-f"}, doomed...)...); err != nil {
			c.logger.Warn("could not remove orphaned containers", "error", err)
			maps.Copy(uids, doomedUIDs)
		}
	}
	if c.uids != nil {
		delete(uids, 0)
		c.uids.listed(uids)
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
			`{{.Name}}|{{index .Config.Labels "` + LabelOwner + `"}}|{{index .Config.Labels "` + LabelPIDSpace + `"}}|{{index .Config.Labels "` + LabelOwnerStart + `"}}|{{.State.Status}}|{{.State.FinishedAt}}|{{.Created}}|{{index .Config.Labels "` + LabelUID + `"}}`}, ids...)...)
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

// listed is what reapOrphans reads of one container: its labels
// LabelOwner, LabelPIDSpace and LabelOwnerStart ("" when it has none),
// its state, when it finished and when it was made, as the engine prints
// them.
type listed struct {
	owner, pidSpace, ownerStart, state, finished, created string
}

// orphan decides for one container (see reapOrphans).
func (c *Engine) orphan(k listed, all bool, now time.Time) bool {
	if k.owner == c.owner {
		return all
	}
	if _, open := liveOwners.Load(k.owner); open {
		return false // another engine of this process
	}
	host, rest, _ := strings.Cut(k.owner, "/")
	pidStr, _, _ := strings.Cut(rest, "/")
	// The owner's start is comparable only in its own PID namespace; on
	// the same host name without it, the wall-clock rule decides.
	samePIDs := k.pidSpace != "" && k.pidSpace == c.pidSpace
	start := ""
	if samePIDs {
		start = k.ownerStart
	}
	pid, err := strconv.Atoi(pidStr)
	if err == nil && pid > 0 && (samePIDs || host == c.host) &&
		(pid == os.Getpid() || !ownerAlive(pid) || reusedPID(pid, start, k.created)) {
		return true
	}
	if k.state == "exited" || k.state == "dead" {
		t, err := parseEngineTime(k.finished)
		return err == nil && now.Sub(t) > staleAfter
	}
	return false
}

// thisPIDSpace is LabelPIDSpace's value for this process: the kernel's
// boot id and the inode of its PID namespace, which together name that
// namespace on every host. "" when either cannot be read.
func thisPIDSpace() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	// ns reads "pid:[4026531836]".
	inode := strings.TrimSuffix(strings.TrimPrefix(ns, "pid:["), "]")
	if inode == ns || inode == "" {
		return ""
	}
	return strings.TrimSpace(string(boot)) + "/" + inode
}

// parseEngineTime reads a time as docker (RFC 3339) or podman prints it.
func parseEngineTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		// podman prints "2006-01-02 15:04:05.999999999 -0700 MST".
		t, err = time.Parse("2006-01-02 15:04:05.999999999 -0700 MST", s)
	}
	return t, err
}

// startedAfter reports whether the process pid started after created, the
// time a container naming pid as its owner was made: then pid is not that
// owner but a process that took the PID after the owner died. Not knowing
// (no /proc entry, a time that does not parse) is false: the container is
// left to the exited-long-ago rule.
func startedAfter(pid int, created string) bool {
	made, err := parseEngineTime(created)
	if err != nil {
		return false
	}
	started, ok := processStart(pid)
	// The start time is known to a clock tick and the boot time to the
	// second: a process started within 2 s of the container is taken
	// for its owner.
	return ok && started.After(made.Add(2*time.Second))
}

// reusedPID reports whether pid, alive in this PID namespace, is not the
// owner that started at ownerStart (LabelOwnerStart) but a process that
// took its PID after it died. A container without the label falls back
// on startedAfter. Not knowing (the process went meanwhile) is false.
func reusedPID(pid int, ownerStart, created string) bool {
	if ownerStart == "" {
		return startedAfter(pid, created)
	}
	ticks, ok := processStartTicks(pid)
	return ok && strconv.FormatInt(ticks, 10) != ownerStart
}

// processStart is when pid started: /proc/PID/stat's starttime, in clock
// ticks since boot (USER_HZ, 100 on Linux), plus /proc/stat's btime.
func processStart(pid int) (time.Time, bool) {
	ticks, ok := processStartTicks(pid)
	if !ok {
		return time.Time{}, false
	}
	boot, ok := bootTime()
	if !ok {
		return time.Time{}, false
	}
	const userHZ = 100
	return boot.Add(time.Duration(ticks) * (time.Second / userHZ)), true
}

// processStartTicks is /proc/PID/stat's starttime: when pid started, in
// clock ticks since boot.
func processStartTicks(pid int) (int64, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted are those after its closing parenthesis, from field 3 on.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return 0, false
	}
	ticks, err := strconv.ParseInt(fields[19], 10, 64) // field 22, starttime
	return ticks, err == nil
}

// bootTime is /proc/stat's btime.
func bootTime() (time.Time, bool) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Unix(sec, 0), err == nil
		}
	}
	return time.Time{}, false
}

// ownerAlive reports whether pid exists (signal 0).
func ownerAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
