package result

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// StateLostNote tells the model what a killed sandbox means for its next
// call, when the session is not durable.
const StateLostNote = "The sandbox was stopped and the session state (variables, imports, functions) was lost; the next call starts fresh."

// EndedNotice follows a call whose code ended its session.
const EndedNotice = "the session has ended and its checkpoint is deleted; the next call starts a new session"

// RolledBackNote is StateLostNote for a durable session.
const RolledBackNote = "The sandbox was stopped; the next call restores the session from its last checkpoint, without this call's effects."

// Outcome is everything the gateway gathered from one Execute call.
type Outcome struct {
	// Stdout and Stderr are the output chunks, concatenated per stream.
	Stdout, Stderr string
	// Result is the final message of the stream; nil when Err is set.
	Result *sandboxv1.ExecResult
	// Err is the RPC error that ended the call early, if any.
	Err error
	// TimeoutSeconds is the timeout the gateway asked for.
	TimeoutSeconds float64
	// Servers are the servers the gateway asked for, reported when the
	// sandbox did not report its own list.
	Servers []string
	// Notices are gateway messages for the model, such as a lost session.
	// They open stderr, in brackets, so that they read as annotations.
	Notices []string
	// OutputCapBytes is the sandbox's output cap, for the truncation note.
	OutputCapBytes int64
	// Session is the handle to report (see Payload.Session), and
	// NewSession whether the call began it.
	Session    string
	NewSession bool
	// Images are the images the code showed, in order.
	Images []Image
	// Questions, when set, are the run's tool calls that wait for a
	// person's approval, which the call returns (as an input_required
	// result) instead of a result; the run goes on once they are
	// answered.
	Questions []*sandboxv1.ApprovalRequest
}

// Validation is the payload for bad tool arguments.
func Validation(msg string) Payload {
	return Payload{Status: StatusValidationError, Summary: msg, Error: msg}
}

// Failure is the payload for a call that could not run at all.
func Failure(summary, err string) Payload {
	return Payload{Status: StatusError, Summary: summary, Error: err}
}

// UnknownTool is the payload for a call to a tool other than run_python.
func UnknownTool(name string) Payload {
	msg := "Unknown tool: " + name
	return Failure(msg, msg)
}

// FromOutcome maps an Execute outcome to a payload.
func FromOutcome(o Outcome) Payload {
	p := Payload{
		Stdout:     Lines(o.Stdout),
		Stderr:     Lines(o.Stderr),
		Servers:    o.Servers,
		Session:    o.Session,
		NewSession: o.NewSession,
		Images:     o.Images,
	}
	addNotices(&p, o)
	r := o.Result
	if o.Err != nil || r == nil {
		msg := RPCErrorMessage(o.Err)
		p.Status, p.Summary, p.Error = StatusError, "Sandbox error: "+msg, msg
		return p
	}
	if len(r.GetServers()) > 0 {
		p.Servers = r.GetServers()
	}
	if n := r.GetStdoutDroppedBytes(); n > 0 {
		p.Stdout = append(p.Stdout, TruncationNote(n, o.OutputCapBytes))
	}
	if n := r.GetStderrDroppedBytes(); n > 0 {
		p.Stderr = append(p.Stderr, TruncationNote(n, o.OutputCapBytes))
	}
	setStatus(&p, r, o.TimeoutSeconds)
	return p
}

// addNotices opens stderr with the gateway's notices and those the
// result calls for (a restore, a checkpoint not stored, values not
// checkpointed, an ended session), each in brackets. An ended session's
// handle names nothing any more, so it is not handed out.
func addNotices(p *Payload, o Outcome) {
	if r := o.Result; r != nil {
		if rr := r.GetRestored(); rr != nil {
			o.Notices = append(o.Notices, RestoreNotice(rr))
		}
		if why := r.GetNotDurable(); why != "" {
			o.Notices = append(o.Notices, "not durable: "+why)
		}
		if u := r.GetUncheckpointed(); len(u) > 0 {
			o.Notices = append(o.Notices, UncheckpointedNotice(u))
		}
		p.Links, p.FilesLine = outFiles(r)
		if r.GetEnded() {
			p.Session, p.NewSession = "", false
			o.Notices = append(o.Notices, EndedNotice)
		}
	}
	if len(o.Notices) == 0 {
		return
	}
	notes := make([]string, 0, len(o.Notices)+len(p.Stderr))
	for _, n := range o.Notices {
		notes = append(notes, "["+n+"]")
	}
	p.Stderr = append(notes, p.Stderr...)
}

// setStatus sets the status, summary, error and exit code of a call that
// ended with result r; timeoutSeconds is what the gateway asked for.
func setStatus(p *Payload, r *sandboxv1.ExecResult, timeoutSeconds float64) {
	exit := int(r.GetExitCode())
	switch r.GetStatus() {
	case sandboxv1.ExecStatus_EXEC_STATUS_OK:
		p.Status, p.ExitCode = StatusSuccess, &exit
		p.Summary = "Success"
		if len(p.Stdout) == 0 && len(p.Stderr) == 0 && len(p.Images) == 0 && p.FilesLine == "" {
			p.Summary = "Success (no output)"
		}
	case sandboxv1.ExecStatus_EXEC_STATUS_ERROR:
		msg := r.GetError()
		if msg == "" {
			msg = fmt.Sprintf("exited with code %d", exit)
		}
		p.Status, p.ExitCode = StatusError, &exit
		p.Summary, p.Error = "Error: "+msg, msg
		if r.GetStateLost() {
			p.Error += ". " + lostNote(r)
		}
	case sandboxv1.ExecStatus_EXEC_STATUS_TIMEOUT:
		n := timeoutSeconds
		if d := r.GetTimeout(); d != nil && d.AsDuration() > 0 {
			n = d.AsDuration().Seconds()
		}
		p.Status, p.TimeoutSeconds = StatusTimeout, n
		p.Summary = fmt.Sprintf("Timeout: execution exceeded %gs", n)
		p.Error = fmt.Sprintf("Execution exceeded the %gs timeout. %s", n, lostNote(r))
		if note := r.GetTimeoutNote(); note != "" {
			p.Error = fmt.Sprintf("Execution exceeded the %gs timeout: %s. %s", n, note, lostNote(r))
		}
	case sandboxv1.ExecStatus_EXEC_STATUS_RUNNING:
		p.Status, p.Summary = StatusRunning, RunningSummary(r, p.Session)
	case sandboxv1.ExecStatus_EXEC_STATUS_NO_RUN:
		p.Status, p.Summary = StatusIdle, IdleSummary
	case sandboxv1.ExecStatus_EXEC_STATUS_KILLED:
		if why := r.GetInterrupted(); why != "" {
			p.Status, p.Summary = StatusInterrupted, "Interrupted: "+why
			p.Error = strings.TrimSuffix(why, ".") + ". " + lostNote(r)
			return
		}
		msg := r.GetError()
		if msg == "" {
			msg = "the sandbox died"
		}
		p.Status, p.Summary = StatusError, "Sandbox stopped: "+msg
		p.Error = strings.TrimSuffix(msg, ".") + ". " + lostNote(r)
		if exit != 0 {
			p.ExitCode = &exit
		}
	default:
		p.Status = StatusError
		p.Summary = "Sandbox error: the sandbox service returned no status"
		p.Error = "the sandbox service returned no status"
	}
}

// IdleSummary answers a wait on a session with nothing running.
const IdleSummary = "Nothing is running in this session: no run is in flight and every result was delivered; pass code to run"

// RunningSummary is the line of a call that yielded: how long its run has
// gone, and how to continue it (handle: the session's, to name it).
func RunningSummary(r *sandboxv1.ExecResult, handle string) string {
	named := ""
	if handle != "" {
		named = fmt.Sprintf(", session=%q", handle)
	}
	return fmt.Sprintf("Still running after %s of its %s timeout; call run_python with code=\"\"%s to wait for more output, or add cancel=true to stop it",
		seconds(r.GetDuration().AsDuration()), seconds(r.GetTimeout().AsDuration()), named)
}

// seconds renders d in whole seconds (at least 1).
func seconds(d time.Duration) string {
	return fmt.Sprintf("%ds", max(1, int(d.Round(time.Second).Seconds())))
}

// lostNote says what a stopped sandbox costs: the call's effects when the
// session is durable, everything otherwise.
func lostNote(r *sandboxv1.ExecResult) string {
	if r.GetDurable() && r.GetNotDurable() == "" {
		return RolledBackNote
	}
	return StateLostNote
}

// RestoreNotice says, in one line, that the call ran in a sandbox rebuilt
// from the session's checkpoint: why, what came back, what did not, the
// calls after the checkpoint whose own checkpoints were not stored, and
// whether the last call's effects were rolled back; or, when no checkpoint
// had been stored though calls ran, that the session starts fresh.
func RestoreNotice(r *sandboxv1.RestoreReport) string {
	var b strings.Builder
	if r.GetFresh() {
		// The checkpoint did not come back: say so, not "restored".
		b.WriteString("the session's sandbox was replaced, and its checkpoint could not be restored")
		if r.GetReason() != "" {
			b.WriteString(" (" + r.GetReason() + ")")
		}
		b.WriteString(": the session started fresh, its earlier state is gone, and so is the checkpoint")
		return b.String()
	}
	if r.GetCalls() == 0 && len(r.GetNames()) == 0 && r.GetMissed() > 0 {
		// There was no checkpoint: nothing came back at all.
		b.WriteString("the session's sandbox was replaced")
		if r.GetReason() != "" {
			b.WriteString(" (" + r.GetReason() + ")")
		}
		if n := r.GetMissed(); n == 1 {
			b.WriteString(" before any checkpoint of it was stored: the effects of its earlier call are gone and it starts fresh")
		} else {
			fmt.Fprintf(&b, " before any checkpoint of it was stored: the effects of its %d earlier calls are gone and it starts fresh", n)
		}
		if why := r.GetMissedWhy(); why != "" {
			b.WriteString(" (" + why + ")")
		}
		return b.String()
	}
	b.WriteString("restored the session from its checkpoint")
	if r.GetReason() != "" {
		b.WriteString(" (" + r.GetReason() + ")")
	}
	if names := r.GetNames(); len(names) > 0 {
		b.WriteString(": " + listed(names, 12))
	} else if len(r.GetFiles()) == 0 {
		b.WriteString(": nothing to restore")
	}
	if files := r.GetFiles(); len(files) > 0 {
		if len(r.GetNames()) > 0 {
			b.WriteString(";")
		} else {
			b.WriteString(":")
		}
		b.WriteString(" files " + listed(files, 12))
	}
	if lost := r.GetLost(); len(lost) > 0 {
		b.WriteString("; not restored: " + lostList(lost))
	}
	if n := r.GetMissed(); n > 0 {
		if n == 1 {
			b.WriteString("; the effects of the call after that checkpoint are gone too, as its checkpoint was not stored")
		} else {
			fmt.Fprintf(&b, "; the effects of the %d calls after that checkpoint are gone too, as none of their checkpoints was stored", n)
		}
		if why := r.GetMissedWhy(); why != "" {
			b.WriteString(" (" + why + ")")
		}
	}
	if r.GetRolledBack() {
		b.WriteString("; the interrupted call's effects were rolled back")
	}
	if env := r.GetEnvironment(); env != "" {
		b.WriteString("; " + env)
	}
	return b.String()
}

// UncheckpointedNotice names the values the session's checkpoint could
// not hold, which a restore would not bring back.
func UncheckpointedNotice(names []*sandboxv1.LostName) string {
	return "not checkpointed, so lost if the sandbox stops: " + lostList(names) +
		"; keep such values in a form pickle can save, or make them again after a restore"
}

// lostList names each lost value with what it held, up to 8 of them.
func lostList(names []*sandboxv1.LostName) string {
	parts := make([]string, len(names))
	for i, l := range names {
		parts[i] = l.GetName() + " (" + l.GetKind() + ")"
	}
	return listed(parts, 8)
}

// listed joins up to n items and counts the rest.
func listed(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(" and %d more", len(items)-n)
}

// RPCErrorMessage turns an error from the sandbox service into a message the
// model can act on. Messages of InvalidArgument and similar codes come from
// sandboxd's own validation (an unknown server, say) and pass through.
func RPCErrorMessage(err error) string {
	if err == nil {
		return "the sandbox service ended the call without a result"
	}
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := st.Message()
	switch st.Code() {
	case codes.Unavailable:
		return "the sandbox service is unreachable (" + msg + "); retry shortly, and if it persists check that sandboxd is running"
	case codes.DeadlineExceeded:
		return "the sandbox service did not answer in time"
	case codes.Canceled:
		return "the call was cancelled"
	case codes.ResourceExhausted:
		if strings.Contains(msg, "larger than max") {
			// grpc-go's own refusal of a message over the size limit,
			// on either side: the same call fails again however long
			// one waits.
			return "the call is too large for the sandbox service (" + msg + "); retrying will not help: " +
				"do not inline large data in the code or print it at once, but write it to a file under /workspace in smaller calls, or fetch it from inside the sandbox"
		}
		return "the sandbox service is at capacity (" + msg + "); retry shortly"
	default:
		return msg
	}
}
