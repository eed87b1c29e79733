package forkserver

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Mode says how a forked sandbox runs its command.
type Mode string

const (
	// ModeAgent runs the agent's entry, which the server imported, in the
	// forked interpreter: the command is [python, -I, AgentEntry].
	ModeAgent Mode = "agent"
	// ModeScript runs [python, -I, -c, script, args...] in the forked
	// interpreter.
	ModeScript Mode = "script"
	// ModeExec executes the command in the sandbox, as bwrap would: any
	// command, at the cost of a program start.
	ModeExec Mode = "exec"
)

// Rlimit is a resource limit the sandbox gets (soft and hard).
type Rlimit struct {
	Resource int
	Value    uint64
}

// Request is one sandbox to fork.
type Request struct {
	// Hold makes a spare: the sandbox is set up, and its own process
	// (PID 2) is forked and waits, before its last steps (seccomp
	// included), for Server.Release to give it its command and stdio. A spare's request has neither (Mode, Argv,
	// Env and the stdio are ignored).
	Hold bool
	Mode Mode
	// Argv and Env are the sandbox's command and complete environment.
	Argv []string
	Env  map[string]string
	// ServerAgent gives the sandbox the server's agent directory
	// (Config.AgentDir) at engine.AgentMount; else AgentTree, when not nil,
	// is another directory's mount tree (open_tree(2) with
	// OPEN_TREE_CLONE), mounted there instead. With neither the sandbox
	// gets an empty directory there.
	ServerAgent bool
	AgentTree   *os.File
	// TmpBytes sizes /tmp and /dev/shm, WorkspaceBytes /workspace; 0
	// leaves a tmpfs unsized.
	TmpBytes, WorkspaceBytes int64
	// Rlimits are set before the sandbox's namespaces are made, NsRlimits
	// inside its user namespace once it is made (engine.Limits'
	// PendingSignals and LockedBytes: a user namespace keeps, as the
	// bound of what all below it may use, the limit its creator had).
	Rlimits   []Rlimit
	NsRlimits []Rlimit
	// Stdin, Stdout and Stderr are the sandbox's ends of its pipes.
	Stdin, Stdout, Stderr *os.File
	// Cgroups are open cgroup files that the sandbox's first process
	// writes "0" to, joining each cgroup before anything else runs.
	Cgroups []*os.File
}

// maxRequest is the largest request the server reads (MAX_REQUEST).
const maxRequest = 1 << 20

// encode returns the request's NUL-separated fields in the order
// Request.__init__ in codeexec_forkserver.py reads them.
func (r *Request) encode() ([]byte, error) {
	kind := "fork1"
	if r.Hold {
		kind = "hold1"
	} else {
		switch r.Mode {
		case ModeAgent, ModeScript, ModeExec:
		default:
			return nil, fmt.Errorf("fork server: unknown mode %q", r.Mode)
		}
		if len(r.Argv) == 0 {
			return nil, errors.New("fork server: empty command")
		}
	}
	agent := ""
	switch {
	case r.ServerAgent:
		agent = "server"
	case r.AgentTree != nil:
		agent = "tree"
	}
	f := []string{kind, string(r.Mode), agent,
		strconv.FormatInt(r.TmpBytes, 10), strconv.FormatInt(r.WorkspaceBytes, 10),
		strconv.Itoa(len(r.Rlimits))}
	for _, l := range r.Rlimits {
		f = append(f, strconv.Itoa(l.Resource), strconv.FormatUint(l.Value, 10))
	}
	f = append(f, strconv.Itoa(len(r.NsRlimits)))
	for _, l := range r.NsRlimits {
		f = append(f, strconv.Itoa(l.Resource), strconv.FormatUint(l.Value, 10))
	}
	f = append(f, strconv.Itoa(len(r.Argv)))
	f = append(f, r.Argv...)
	f = append(f, strconv.Itoa(len(r.Env)))
	for _, k := range slices.Sorted(maps.Keys(r.Env)) {
		f = append(f, k, r.Env[k])
	}
	for _, s := range f {
		if strings.IndexByte(s, 0) >= 0 {
			return nil, errors.New("fork server: a command, environment or path holds NUL")
		}
	}
	b := []byte(strings.Join(f, "\x00"))
	if len(b) > maxRequest {
		return nil, fmt.Errorf("fork server: request of %d bytes exceeds %d", len(b), maxRequest)
	}
	return b, nil
}

// files lists the descriptors that travel with the request, in the order
// the server expects: stdio, the report socket, the agent's tree if the
// request has one, then the cgroups.
func (r *Request) files(report *os.File) []*os.File {
	fs := []*os.File{r.Stdin, r.Stdout, r.Stderr, report}
	if r.Hold {
		fs = fs[3:]
	}
	if !r.ServerAgent && r.AgentTree != nil {
		fs = append(fs, r.AgentTree)
	}
	return append(fs, r.Cgroups...)
}

// encodeRelease returns what Server.Release sends: "go1", the spare's
// monitor PID, then r's fields after the first (only the mode, command
// and environment count).
func (r *Request) encodeRelease(pid int) ([]byte, error) {
	if r.Hold {
		return nil, errors.New("fork server: a release is no spare")
	}
	b, err := r.encode()
	if err != nil {
		return nil, err
	}
	_, rest, _ := strings.Cut(string(b), "\x00")
	return []byte("go1\x00" + strconv.Itoa(pid) + "\x00" + rest), nil
}
