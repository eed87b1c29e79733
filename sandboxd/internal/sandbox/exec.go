package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Status is how an exec ended.
type Status int

// Exec statuses; see the proto's ExecStatus.
const (
	StatusOK Status = iota + 1
	StatusError
	StatusTimeout
	StatusKilled
	// StatusRunning and StatusNoRun are a session's, not an exec's: a
	// call that yielded with its run going on, and an attach that found
	// nothing to wait for.
	StatusRunning
	StatusNoRun
)

var statusNames = map[Status]string{
	StatusOK: "ok", StatusError: "error", StatusTimeout: "timeout", StatusKilled: "killed",
	StatusRunning: "running", StatusNoRun: "no_run",
}

func (s Status) String() string { return statusNames[s] }

// Output receives output as it arrives. stream is "stdout" or "stderr".
type Output func(stream, text string) error

// Progress is the code's report of its progress (runtime.progress).
type Progress struct {
	Done, Total float64
	Message     string
}

// Exec is one exec to run.
type Exec struct {
	Code string
	// Env is what the exec may use; Tenant and Calls serve its calls.
	Env    *ExecEnv
	Tenant string
	Calls  Caller
	// OutputLimit caps the bytes of each output stream; Limits are the
	// sandbox's, named in the error of an exec that hit one.
	OutputLimit int64
	Limits      engine.Limits
	// Tools is called once, before the exec is sent; first says whether
	// it is the first exec of a session in this sandbox, which carries
	// the saved tools Tools returns (nil: none fetched).
	Tools func(first bool) []channel.SavedTool
	// Checkpoint, when set, asks for a checkpoint after the exec.
	Checkpoint *Checkpoint
	// Budget is the code's time; Timeout, the call's, and TimeoutNote,
	// what took the rest of it, are said when the budget runs out.
	Budget, Timeout time.Duration
	TimeoutNote     string
	// Paused, when set, reports whether the sandbox is paused: an exec
	// that times out so says why.
	Paused func() bool
	// Out receives the exec's output, Display its images and Progress,
	// when set, its progress.
	Out      Output
	Display  Display
	Progress func(Progress)
	// Results bounds the output and the images for a model (results.go);
	// its Workspace applies only with Checkpoint.
	Results Results
	// Logger logs what goes wrong in the exec (the session's logger).
	Logger *slog.Logger
}

// Checkpoint asks for a checkpoint of at most Bytes after an exec. Begin
// runs just before the exec is sent, Cancel when no checkpoint will
// follow it after all (the exec could not be sent, or ended its session).
type Checkpoint struct {
	Bytes         int64
	Begin, Cancel func()
}

// Outcome is how an exec ended. Failures of user code are data here.
type Outcome struct {
	Status    Status
	ExitCode  int
	Error     string
	Duration  time.Duration
	StateLost bool
	Dropped   map[string]int64
	// TimeoutNote, for a call that timed out, says what took part of its
	// timeout before the code ran, and what to do; empty when nothing did.
	TimeoutNote string
	// Ended is set when the code ended its session.
	Ended bool
	// Files are the files under /workspace/out the exec made or changed,
	// and FilesMore how many more there were.
	Files     []channel.OutFile
	FilesMore int
	// Cancelled, when set, says who cancelled the exec (a CancelledError
	// as its context's cause).
	Cancelled string
}

// CancelledError is the cause of an exec's context that says who cancelled
// it: its result says so instead of "cancelled by the client".
type CancelledError struct{ Why string }

func (e *CancelledError) Error() string { return e.Why }

// Exec runs one exec until done, death or the end of its budget, and
// streams its output.
func (sb *Sandbox) Exec(ctx context.Context, x Exec) *Outcome {
	sb.mu.Lock()
	sb.nextExec++
	id := sb.nextExec
	first := !sb.sessionStarted
	sb.sessionStarted = true
	sb.mu.Unlock()
	tools := x.Tools(first)
	callCtx, cancelCalls := context.WithCancel(ctx)
	defer cancelCalls()
	if x.Logger == nil {
		x.Logger = sb.logger
	}
	e := &execution{sb: sb, x: x, id: id, counted: map[string]int64{}, res: &Outcome{Dropped: map[string]int64{}}}
	e.runawayBefore = sb.proc.PidsLimitHit()
	if x.Checkpoint != nil {
		// Noted before the exec goes out, so that the committer, which
		// may read the checkpoint before this goroutine reads the done
		// before it, finds the count the checkpoint reflects.
		x.Checkpoint.Begin()
		sb.expectCheckpoint(id)
	}
	var ckpt int64
	results := x.Results
	if x.Checkpoint != nil {
		ckpt = x.Checkpoint.Bytes
	} else {
		results.Workspace = 0
	}
	e.gate = newDisplayGate(results)
	start := time.Now()
	if err := sb.sendExec(id, x.Code, x.Env, x.OutputLimit, first, tools, ckpt, results); err != nil {
		if x.Checkpoint != nil {
			x.Checkpoint.Cancel()
		}
		e.res.Status, e.res.StateLost = StatusKilled, true
		e.res.Error = "could not send code to the sandbox: " + err.Error()
		return e.res
	}
	// A call waiting for its turn gives up when the budget ends, and the
	// loop then finds the timeout.
	waitCtx, cancelWait := context.WithTimeout(callCtx, x.Budget)
	defer cancelWait()
	return e.wait(ctx, waitCtx, start)
}

// execution is the state of one Exec while it runs.
type execution struct {
	sb      *Sandbox
	x       Exec
	id      int64
	counted map[string]int64
	res     *Outcome
	// runawayBefore is whether the sandbox had hit its process limit
	// before the exec.
	runawayBefore bool
	// gate holds the exec's images to its bounds.
	gate *displayGate
}

// wait reads the sandbox's frames until the exec is done, the sandbox
// dies, the budget runs out or ctx ends; calls ends the exec's calls.
func (e *execution) wait(ctx, calls context.Context, start time.Time) *Outcome {
	sb, res := e.sb, e.res
	timer := time.NewTimer(e.x.Budget)
	defer timer.Stop()
	for {
		select {
		case msg := <-sb.msgs:
			if e.handle(ctx, calls, msg) {
				res.Duration = time.Since(start)
				e.processLimit(res)
				return res
			}
		case <-sb.dead:
			e.drain(ctx, calls)
			res.Duration = time.Since(start)
			res.Status, res.StateLost = StatusKilled, true
			res.Error = sb.describeDeath() + sb.deathHint(e.x.Limits)
			return res
		case <-timer.C:
			e.timedOut(ctx, calls)
			res.Duration = time.Since(start)
			return res
		case <-ctx.Done():
			// The caller is gone, or cancelled the run; the code must not
			// run on unobserved.
			sb.Kill()
			e.drain(ctx, calls)
			res.Duration = time.Since(start)
			res.Status, res.StateLost = StatusKilled, true
			res.Error = "the call was cancelled by the client; the sandbox was stopped"
			if c := (*CancelledError)(nil); errors.As(context.Cause(ctx), &c) {
				res.Error, res.Cancelled = c.Why+"; the sandbox was stopped", c.Why
			}
			return res
		}
	}
}

// timedOut stops the sandbox of an exec whose budget ran out, and says so.
func (e *execution) timedOut(ctx, calls context.Context) {
	paused := e.x.Paused != nil && e.x.Paused()
	e.sb.Kill()
	e.drain(ctx, calls)
	res, timeout := e.res, e.x.Timeout
	res.Status, res.StateLost = StatusTimeout, true
	res.Error = fmt.Sprintf("execution exceeded the %s timeout; the sandbox was stopped", timeout)
	if res.TimeoutNote = e.x.TimeoutNote; res.TimeoutNote != "" {
		res.Error = fmt.Sprintf("execution exceeded the %s timeout (%s); the sandbox was stopped", timeout, res.TimeoutNote)
	}
	if paused {
		res.Error += "; it had been paused since this sandbox replica lost the session store, which did not come back in time"
	}
}

// drain handles the frames read before the sandbox ended.
func (e *execution) drain(ctx, calls context.Context) {
	for {
		select {
		case msg := <-e.sb.msgs:
			if e.handle(ctx, calls, msg) {
				return
			}
		default:
			return
		}
	}
}

// handle takes one frame of the exec, and reports whether it ended it;
// a call it starts ends with calls.
func (e *execution) handle(ctx, calls context.Context, msg channel.Message) (finished bool) {
	switch msg := msg.(type) {
	case *channel.Out:
		e.output(ctx, msg)
	case *channel.Display:
		if msg.Exec == e.id && e.x.Display != nil && e.gate.admit(msg) {
			if err := e.x.Display(msg); err != nil {
				e.x.Logger.DebugContext(ctx, "display receiver failed", logkeys.Error, err)
			}
		}
	case *channel.Progress:
		if msg.Exec == e.id && e.x.Progress != nil {
			e.x.Progress(Progress{Done: msg.Done, Total: msg.Total, Message: msg.Message})
		}
	case *channel.Call:
		// A call ends by the exec's timeout, so that a call to a server
		// still starting gives up in time to tell the code which one.
		c := call{caller: e.x.Calls, tenant: e.x.Tenant, env: e.x.Env, exec: e.id}
		e.sb.startCall(calls, func() { e.sb.serve(calls, c, msg) })
	case *channel.Done:
		if msg.Exec != e.id {
			return false
		}
		e.done(msg)
		return true
	default:
		e.x.Logger.WarnContext(ctx, "unexpected message from sandbox", "type", msg.Type())
	}
	return false
}

// output passes on one output frame of the exec, within its limit.
func (e *execution) output(ctx context.Context, msg *channel.Out) {
	if msg.Exec != e.id {
		return // output of an earlier exec: never attributed here
	}
	stream := msg.Stream
	if stream != "stderr" {
		stream = "stdout"
	}
	// The agent applies the cap; this is a backstop against an agent
	// that does not. With a budget the agent sends at most that many
	// characters (4 bytes each at most) and ignores the cap.
	limit := e.x.OutputLimit
	if b := e.x.Results.Budget; b > 0 && limit > 0 {
		limit = max(limit, 4*b)
	}
	if limit > 0 && e.counted[stream]+int64(len(msg.Data)) > limit+(64<<10) {
		e.res.Dropped[stream] += int64(len(msg.Data))
		return
	}
	e.counted[stream] += int64(len(msg.Data))
	if e.x.Out != nil {
		if err := e.x.Out(stream, msg.Data); err != nil {
			e.x.Logger.DebugContext(ctx, "output receiver failed", logkeys.Error, err)
		}
	}
}

// done takes the exec's done frame.
func (e *execution) done(msg *channel.Done) {
	res := e.res
	res.ExitCode = msg.Exit
	res.Error = msg.Error
	res.Status = StatusOK
	if !msg.OK {
		res.Status = StatusError
		if res.ExitCode == 0 {
			res.ExitCode = 1
		}
	}
	// The agent's own counts; a frame forged by the code may say
	// anything, and a negative or huge count must not wrap round.
	for k, v := range msg.Dropped {
		if v > 0 && (k == "stdout" || k == "stderr") {
			res.Dropped[k] = min(res.Dropped[k], math.MaxInt64-v) + v
		}
	}
	res.Ended = msg.End
	res.Files, res.FilesMore = outFiles(msg)
	if e.x.Checkpoint != nil && msg.End {
		// The agent takes no checkpoint of a session it ends.
		e.x.Checkpoint.Cancel()
	}
}

// processLimit tells res of the process limit when the code reached it
// in this exec. Only processes left running at the cap make a runaway,
// which stops the sandbox (they would keep it busy forever); code that
// caught the error and let its processes end keeps its session, and a
// failed exec still says which limit it met, whatever its processes did
// after (an unknown count is taken for a runaway).
func (e *execution) processLimit(res *Outcome) {
	if e.runawayBefore || !e.sb.proc.PidsLimitHit() {
		return
	}
	const limit = "the code reached the process limit (%d; raise MCP_BRIDGE_PIDS if it needs more)"
	switch pids := e.x.Limits.Pids; {
	case runaway(e.sb.proc.Usage().PidsCurrent, pids):
		res.Status, res.StateLost = StatusError, true
		res.Error = joinErr(res.Error, fmt.Sprintf(limit+", so the sandbox was stopped to clear the runaway processes", pids))
	case res.Status == StatusError:
		res.Error = joinErr(res.Error, fmt.Sprintf(limit, pids))
	}
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// sendExec writes an exec frame; a first exec carries the saved tools
// fetched for it (nil: none fetched), and a positive checkpoint asks for
// a checkpoint of at most that many bytes after it.
func (sb *Sandbox) sendExec(id int64, code string, env *ExecEnv, limit int64, first bool, tools []channel.SavedTool, checkpoint int64, results Results) error {
	// Never null: the agent reads an empty list as no servers.
	servers, discovered := env.Servers, env.Discovered
	if servers == nil {
		servers = []channel.Server{}
	}
	if discovered == nil {
		discovered = []channel.DiscoveredServer{}
	}
	msg := &channel.Exec{
		ID: id, Code: code, Servers: servers, Discovered: discovered, Unloaded: env.Unloaded, Limit: limit, First: first, SavedTools: tools, Checkpoint: checkpoint,
	}
	results.apply(msg)
	err := sb.conn.Write(msg)
	if errors.Is(err, channel.ErrFrameTooLarge) && msg.SavedTools != nil {
		// The code and the tools together are too large for one frame
		// (each alone fits): the agent asks for the tools in a frame of
		// their own, as it does when they were not fetched.
		msg.SavedTools = nil
		err = sb.conn.Write(msg)
	}
	return err
}

// WarmUp runs one empty exec so that the agent's one-time setup is done
// before a session takes the sandbox: a pooled sandbox's first real exec
// is then as fast as any later one.
func (sb *Sandbox) WarmUp(ctx context.Context) error {
	sb.mu.Lock()
	sb.nextExec++
	id := sb.nextExec
	sb.mu.Unlock()
	if err := sb.sendExec(id, "pass", &ExecEnv{}, 0, false, nil, 0, Results{}); err != nil {
		return err
	}
	for {
		select {
		case msg := <-sb.msgs:
			if done, ok := msg.(*channel.Done); ok && done.Exec == id {
				if !done.OK {
					return fmt.Errorf("warm-up exec failed: %s", done.Error)
				}
				return nil
			}
		case <-sb.dead:
			return fmt.Errorf("sandbox died during warm-up: %s", sb.describeDeath())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// runaway reports whether a sandbox that reached its process cap still
// holds half of it once its exec has ended; a count of 0 is unknown.
func runaway(current int64, limit int) bool { return current == 0 || 2*current >= int64(limit) }
