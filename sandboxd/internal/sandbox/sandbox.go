// Package sandbox drives one live sandbox: the process an engine started
// and the agent in it, over the framed channel (docs/PROTOCOL.md). It
// sends execs and streams their output, serves the calls the code makes,
// restores a checkpoint into a fresh sandbox and hands the checkpoints the
// agent sends to whoever stores them. What a sandbox is for (its session,
// its lease on the session store, its place under --max-sessions) is the
// business of the packages above: session, lease and capacity.
package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/ratelog"
)

// Sandbox is one live sandbox process with its agent.
type Sandbox struct {
	id     string
	proc   engine.Process
	conn   *channel.Conn
	logger *slog.Logger

	ready chan struct{}        // closed when the agent said "ready"
	msgs  chan channel.Message // out, call and done frames, in order
	// calls holds a token for each of the sandbox's calls being served
	// (startCall).
	calls chan struct{}
	// ckpts carries checkpoint frames and restored the answer to a
	// restore: they belong to the session's durability, not to an exec.
	ckpts    chan *channel.Checkpoint
	restored chan *channel.Restored
	dead     chan struct{} // closed when the channel ended
	done     chan struct{} // closed when the process was reaped
	// committed is closed when Checkpoints has returned.
	committed chan struct{}

	mu      sync.Mutex
	readErr error
	waitErr error
	stderr  tail
	// stopWhy, when set, is why sandboxd is stopping the sandbox: the
	// death a call in flight reports (see SetStopReason).
	stopWhy  string
	nextExec int64
	// sessionStarted is set once a session has sent this sandbox an exec
	// (the pool's warm-up exec does not count).
	sessionStarted bool
	python         string
	usage          engine.Usage
	// refused is the agent's reason for not taking the last checkpoint,
	// noted by the reader as the frame arrives, so that the result of the
	// exec after it (which the agent sends later) can say so.
	refused string
	// refusedExec is the exec after which the last refused checkpoint was
	// to be taken: the verdicts on earlier checkpoints, which the committer
	// may still be storing, are older news.
	refusedExec int64
	// ckptDue is the exec to be followed by a checkpoint once it is done,
	// and ckptOpen the exec whose checkpoint frames the reader passes on
	// now (0: none); see admitCheckpoint. strayWarned is set once a
	// frame outside them was dropped and logged.
	ckptDue, ckptOpen int64
	strayWarned       bool
	// strange counts frames of types an agent never sends (code in the
	// sandbox wrote them); see strangeFrame.
	strange int
	// logs limits what the sandbox can make sandboxd log.
	logs ratelog.Limiter
	// afterFirstExec, when set, runs once the first exec of the session
	// that took this sandbox from the pool is done (SetAfterFirstExec).
	afterFirstExec func()
	// onKill runs when the sandbox is first told to stop, and onReap once
	// its process is reaped, before done closes (see OnStop); reaped is
	// set then.
	onKill, onReap func()
	reaped         bool
}

// Start starts a sandbox and waits for its agent to be ready.
func Start(ctx context.Context, eng engine.Engine, spec engine.Spec, logger *slog.Logger) (*Sandbox, error) {
	proc, err := eng.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	sb := &Sandbox{
		id:     spec.ID,
		proc:   proc,
		conn:   channel.New(proc.Stdout(), proc.Stdin()),
		logger: logger.With(logkeys.SandboxID, spec.ID),
		ready:  make(chan struct{}),
		msgs:   make(chan channel.Message, 256),
		calls:  make(chan struct{}, maxCallsInFlight),
		// A checkpoint of a large namespace comes in several frames; the
		// committer reads them as they come.
		ckpts:     make(chan *channel.Checkpoint, 16),
		restored:  make(chan *channel.Restored, 1),
		dead:      make(chan struct{}),
		done:      make(chan struct{}),
		committed: make(chan struct{}),
	}
	go sb.readStderr()
	go sb.readLoop()
	go sb.reap()
	select {
	case <-sb.ready:
		return sb, nil
	case <-sb.dead:
		sb.Kill()
		return nil, fmt.Errorf("the sandbox exited before its agent was ready: %s", sb.describeDeath())
	case <-ctx.Done():
		sb.Kill()
		return nil, fmt.Errorf("sandbox did not become ready: %w", ctx.Err())
	}
}

// reap waits for the process, notes how it ended and runs onReap.
func (sb *Sandbox) reap() {
	err := sb.proc.Wait()
	sb.mu.Lock()
	sb.waitErr = err
	sb.usage = sb.proc.Usage()
	sb.reaped = true
	reaped := sb.onReap
	sb.onKill, sb.onReap = nil, nil
	sb.mu.Unlock()
	if reaped != nil {
		reaped()
	}
	close(sb.done)
}

// SetAfterFirstExec sets f to run once the first exec of a session in
// the sandbox is done (FirstExecDone).
func (sb *Sandbox) SetAfterFirstExec(f func()) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.afterFirstExec = f
}

// FirstExecDone runs what SetAfterFirstExec set, once.
func (sb *Sandbox) FirstExecDone() { sb.runOnce(&sb.afterFirstExec) }

// SessionStarted reports whether a session has sent the sandbox an exec.
func (sb *Sandbox) SessionStarted() bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.sessionStarted
}

// runOnce clears the hook *f (on sb.mu) and runs what it held, if any.
func (sb *Sandbox) runOnce(f *func()) {
	sb.mu.Lock()
	g := *f
	*f = nil
	sb.mu.Unlock()
	if g != nil {
		g()
	}
}

func (sb *Sandbox) readLoop() {
	defer close(sb.dead)
	for {
		m, err := sb.conn.Read()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				sb.logger.Warn("sandbox channel failed", logkeys.Error, err)
			}
			sb.mu.Lock()
			sb.readErr = err
			sb.mu.Unlock()
			return
		}
		sb.route(m)
	}
}

// route passes one frame the agent sent to whoever waits for its kind.
func (sb *Sandbox) route(m channel.Message) {
	switch m := m.(type) {
	case *channel.Ready:
		sb.mu.Lock()
		sb.python = m.Python
		sb.mu.Unlock()
		select {
		case <-sb.ready:
		default:
			close(sb.ready)
		}
	case *channel.Done:
		sb.checkpointAfter(m)
		sb.msgs <- m
	case *channel.Checkpoint:
		if !sb.admitCheckpoint(m) {
			return
		}
		if m.Error != "" {
			sb.mu.Lock()
			sb.refused, sb.refusedExec = m.Error, m.Exec
			sb.mu.Unlock()
		}
		sb.ckpts <- m
	case *channel.Restored:
		select {
		case sb.restored <- m:
		default:
			sb.logs.Warn(context.Background(), sb.logger, "a restored frame nobody asked for")
		}
	case *channel.Unknown, *channel.Exec, *channel.Reply, *channel.Checkpointed, *channel.Restore:
		// Types the agent never sends: sandboxd's own, or none at all.
		sb.strangeFrame(m)
	default:
		sb.msgs <- m
	}
}

// maxStrangeFrames bounds the frames of types an agent never sends that a
// sandbox may send before it is stopped: code in the sandbox can reach the
// channel, and each such frame cost a log line as long as its type.
const maxStrangeFrames = 100

// strangeFrame logs a frame of a type the agent never sends (rate-limited,
// cut short) and stops the sandbox at the maxStrangeFrames-th.
func (sb *Sandbox) strangeFrame(m channel.Message) {
	sb.mu.Lock()
	sb.strange++
	n := sb.strange
	sb.mu.Unlock()
	switch {
	case n < maxStrangeFrames:
		sb.logs.Warn(context.Background(), sb.logger, "dropped a frame of a type the agent never sends (code in the sandbox wrote it)", "type", m.Type(), "count", n)
	case n == maxStrangeFrames:
		sb.logger.Warn("stopping the sandbox: its code sent frames of unknown type to sandboxd", "count", n)
		sb.SetStopReason(fmt.Sprintf("its code sent %d frames of unknown type to sandboxd over the agent's channel", n))
		go sb.Kill()
	}
}

func (sb *Sandbox) readStderr() {
	sc := bufio.NewScanner(sb.proc.Stderr())
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		sb.mu.Lock()
		sb.stderr.add(line)
		sb.mu.Unlock()
		sb.logs.Log(context.Background(), sb.logger, slog.LevelDebug, "sandbox stderr", "line", line)
	}
	_, _ = io.Copy(io.Discard, sb.proc.Stderr())
}

// Alive reports whether the channel is still up.
func (sb *Sandbox) Alive() bool {
	select {
	case <-sb.dead:
		return false
	default:
		return true
	}
}

// Pause stops the sandbox's processes where they are (engine.Process).
func (sb *Sandbox) Pause() error { return sb.proc.Pause() }

// Resume lets a paused sandbox run on.
func (sb *Sandbox) Resume() error { return sb.proc.Resume() }

// OnStop sets what runs when the sandbox is first told to stop (killed)
// and once its process is reaped (reaped, which runs before done closes,
// so that whoever waits on done sees its effect). A sandbox reaped
// already runs reaped at once.
func (sb *Sandbox) OnStop(killed, reaped func()) {
	sb.mu.Lock()
	if sb.reaped {
		sb.mu.Unlock()
		reaped()
		return
	}
	sb.onKill, sb.onReap = killed, reaped
	sb.mu.Unlock()
}

// SetStopReason records why sandboxd is about to stop the sandbox, for the
// call in flight to report.
func (sb *Sandbox) SetStopReason(why string) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.stopWhy = why
}

// Kill stops the sandbox and waits for it to be reaped (bounded).
func (sb *Sandbox) Kill() {
	sb.runOnce(&sb.onKill)
	_ = sb.proc.Kill()
	select {
	case <-sb.done:
	case <-time.After(10 * time.Second):
		sb.logger.Error("sandbox did not exit after kill", logkeys.PID, sb.proc.PID())
	}
}
