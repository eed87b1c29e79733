package session

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/ratelog"
)

// sandbox is one live sandbox process with its agent.
type sandbox struct {
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
	// committed is closed when the session's committer for this sandbox
	// has stored its last checkpoint and returned (durable sessions only).
	committed chan struct{}

	mu      sync.Mutex
	readErr error
	waitErr error
	stderr  tail
	// stopWhy, when set, is why sandboxd is stopping the sandbox: the
	// death a call in flight reports (see setStopReason).
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
	// that took this sandbox from the pool is done (deferredWake).
	afterFirstExec func()
	// onKill runs when the sandbox is first told to stop, and onReap once
	// its process is reaped, before done closes (see onStop); reaped is
	// set then.
	onKill, onReap func()
	reaped         bool
}

// startSandbox starts a sandbox and waits for its agent to be ready.
func startSandbox(ctx context.Context, eng engine.Engine, spec engine.Spec, logger *slog.Logger) (*sandbox, error) {
	proc, err := eng.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	sb := &sandbox{
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
	go func() {
		err := proc.Wait()
		sb.mu.Lock()
		sb.waitErr = err
		sb.usage = proc.Usage()
		sb.reaped = true
		reaped := sb.onReap
		sb.onKill, sb.onReap = nil, nil
		sb.mu.Unlock()
		if reaped != nil {
			reaped()
		}
		close(sb.done)
	}()
	select {
	case <-sb.ready:
		return sb, nil
	case <-sb.dead:
		sb.kill()
		return nil, fmt.Errorf("the sandbox exited before its agent was ready: %s", sb.describeDeath())
	case <-ctx.Done():
		sb.kill()
		return nil, fmt.Errorf("sandbox did not become ready: %w", ctx.Err())
	}
}

// takeRefused returns the reason the agent last refused a checkpoint for,
// once.
func (sb *sandbox) takeRefused() string {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	r := sb.refused
	sb.refused = ""
	return r
}

// supersededBy reports whether the verdict on the checkpoint taken after
// exec is older than a refusal the reader has already seen.
func (sb *sandbox) supersededBy(exec int64) bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return exec < sb.refusedExec
}

// firstExecDone runs afterFirstExec, once.
func (sb *sandbox) firstExecDone() { sb.runOnce(&sb.afterFirstExec) }

// runOnce clears the hook *f (on sb.mu) and runs what it held, if any.
func (sb *sandbox) runOnce(f *func()) {
	sb.mu.Lock()
	g := *f
	*f = nil
	sb.mu.Unlock()
	if g != nil {
		g()
	}
}

func (sb *sandbox) readLoop() {
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
		if r, ok := m.(*channel.Ready); ok {
			sb.mu.Lock()
			sb.python = r.Python
			sb.mu.Unlock()
			select {
			case <-sb.ready:
			default:
				close(sb.ready)
			}
			continue
		}
		switch m := m.(type) {
		case *channel.Done:
			sb.checkpointAfter(m)
			sb.msgs <- m
		case *channel.Checkpoint:
			if !sb.admitCheckpoint(m) {
				continue
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
		case *channel.Out, *channel.Call:
			sb.msgs <- m
		default:
			sb.strangeFrame(m)
		}
	}
}

// maxStrangeFrames bounds the frames of types an agent never sends that a
// sandbox may send before it is stopped: code in the sandbox can reach the
// channel, and each such frame cost a log line as long as its type.
const maxStrangeFrames = 100

// strangeFrame logs a frame of a type the agent never sends (rate-limited,
// cut short) and stops the sandbox at the maxStrangeFrames-th.
func (sb *sandbox) strangeFrame(m channel.Message) {
	sb.mu.Lock()
	sb.strange++
	n := sb.strange
	sb.mu.Unlock()
	switch {
	case n < maxStrangeFrames:
		sb.logs.Warn(context.Background(), sb.logger, "dropped a frame of a type the agent never sends (code in the sandbox wrote it)", "type", m.Type(), "count", n)
	case n == maxStrangeFrames:
		sb.logger.Warn("stopping the sandbox: its code sent frames of unknown type to sandboxd", "count", n)
		sb.setStopReason(fmt.Sprintf("its code sent %d frames of unknown type to sandboxd over the agent's channel", n))
		go sb.kill()
	}
}

// maxCallsInFlight bounds the calls of one sandbox that sandboxd serves at
// once. Code that wrote call frames to the channel in a loop (it can reach
// the agent's channel object) used to get a goroutine for each: 400,000 of
// them took gigabytes of sandboxd's memory and starved the rest of the
// process, the replica's lease renewal among it, so that every tenant's
// live sandboxes were stopped. The agent has every call's reply read by a
// thread of its own, so an honest one never waits on a call it made to
// have another of its calls served.
const maxCallsInFlight = 64

// startCall runs serve in a goroutine of its own once fewer than
// maxCallsInFlight of the sandbox's calls are being served. Until then it
// waits, and the frames behind the call wait with it; it gives up, and
// serve does not run, when ctx ends or the sandbox dies.
func (sb *sandbox) startCall(ctx context.Context, serve func()) {
	select {
	case sb.calls <- struct{}{}:
	case <-ctx.Done():
		return
	case <-sb.dead:
		return
	}
	go func() {
		defer func() { <-sb.calls }()
		serve()
	}()
}

// expectCheckpoint notes that exec id, about to be sent, asks for a
// checkpoint after its done.
func (sb *sandbox) expectCheckpoint(id int64) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.ckptDue = id
}

// checkpointAfter opens the checkpoint of the exec that d ends, if that
// exec asked for one and did not end its session.
func (sb *sandbox) checkpointAfter(d *channel.Done) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if d.Exec != sb.ckptDue {
		return
	}
	sb.ckptDue = 0
	if !d.End {
		sb.ckptOpen = d.Exec
	}
}

// admitCheckpoint reports whether the reader passes checkpoint frame f on
// to the committer. The agent sends one checkpoint after the done of each
// exec that asks for one, and no other (PROTOCOL.md); code in the sandbox
// can reach the channel and write frames of its own, but those sent at any
// other time, or after the checkpoint's last frame, are dropped: an exec
// makes the store take one checkpoint at most.
func (sb *sandbox) admitCheckpoint(f *channel.Checkpoint) bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if f.Exec == 0 || f.Exec != sb.ckptOpen {
		if !sb.strayWarned {
			sb.strayWarned = true
			sb.logger.Warn("dropped a checkpoint frame that no exec asked for (code in the sandbox wrote it); later ones are dropped silently", "exec", f.Exec)
		}
		return false
	}
	if f.Last {
		sb.ckptOpen = 0
	}
	return true
}

func (sb *sandbox) readStderr() {
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

// alive reports whether the channel is still up.
func (sb *sandbox) alive() bool {
	select {
	case <-sb.dead:
		return false
	default:
		return true
	}
}

// onStop sets what runs when the sandbox is first told to stop (killed)
// and once its process is reaped (reaped, which runs before done closes,
// so that whoever waits on done sees its effect). A sandbox reaped
// already runs reaped at once.
func (sb *sandbox) onStop(killed, reaped func()) {
	sb.mu.Lock()
	if sb.reaped {
		sb.mu.Unlock()
		reaped()
		return
	}
	sb.onKill, sb.onReap = killed, reaped
	sb.mu.Unlock()
}

// setStopReason records why sandboxd is about to stop the sandbox, for the
// call in flight to report.
func (sb *sandbox) setStopReason(why string) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.stopWhy = why
}

// kill stops the sandbox and waits for it to be reaped (bounded).
func (sb *sandbox) kill() {
	sb.runOnce(&sb.onKill)
	_ = sb.proc.Kill()
	select {
	case <-sb.done:
	case <-time.After(10 * time.Second):
		sb.logger.Error("sandbox did not exit after kill", logkeys.PID, sb.proc.PID())
	}
}

// finalUsage waits briefly for the process to be reaped and returns its
// usage, so that an OOM kill can be told apart from a crash.
func (sb *sandbox) finalUsage() engine.Usage {
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
func (sb *sandbox) describeDeath() string {
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
