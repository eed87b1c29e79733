package sandbox

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
)

// finalUsage waits briefly for the process to be reaped and returns its
// usage, so that an OOM kill can be told apart from a crash.
func (sb *Sandbox) finalUsage() engine.Usage {
	select {
	case <-sb.done:
	case <-time.After(5 * time.Second):
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.usage == (engine.Usage{}) {
		return sb.proc.Usage()
	}
	return sb.usage
}

// describeDeath explains why the channel ended, most telling cause first.
// An out-of-memory kill says all there is to say; otherwise the exit
// status, a channel error and the tail of the diagnostics stream help.
func (sb *Sandbox) describeDeath() string {
	u := sb.finalUsage()
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if u.OOMKilled {
		return "the sandbox ran out of memory"
	}
	if sb.stopWhy != "" {
		return "the sandbox was stopped: " + sb.stopWhy
	}
	parts := []string{"the sandbox died"}
	if u.PidsLimitHit {
		parts[0] += " after reaching the process limit"
	}
	if sb.waitErr != nil {
		parts = append(parts, sb.waitErr.Error())
	}
	if sb.readErr != nil && !errors.Is(sb.readErr, io.EOF) {
		parts = append(parts, "channel: "+sb.readErr.Error())
	}
	if t := sb.stderr.String(); t != "" {
		parts = append(parts, "stderr: "+t)
	}
	return strings.Join(parts, "; ")
}

// deathHint says which limit a sandbox that died hit, and how to raise it.
func (sb *Sandbox) deathHint(lim engine.Limits) string {
	u := sb.finalUsage()
	switch {
	case u.OOMKilled && lim.MemoryBytes > 0:
		return fmt.Sprintf(" (memory limit %d MiB; use less memory or raise MCP_BRIDGE_MEMORY)", lim.MemoryBytes>>20)
	case u.PidsLimitHit && lim.Pids > 0:
		return fmt.Sprintf(" (process limit %d; raise MCP_BRIDGE_PIDS)", lim.Pids)
	}
	return ""
}

// tail keeps the last few lines of a stream.
type tail struct {
	lines []string
	size  int
}

const tailBytes = 4 << 10

func (t *tail) add(line string) {
	if len(line) > tailBytes {
		line = line[len(line)-tailBytes:]
	}
	t.lines = append(t.lines, line)
	t.size += len(line)
	for t.size > tailBytes && len(t.lines) > 1 {
		t.size -= len(t.lines[0])
		t.lines = t.lines[1:]
	}
}

func (t *tail) String() string { return strings.Join(t.lines, "\n") }
