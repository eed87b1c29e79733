// Package server implements SandboxService over a session.Manager: it
// turns requests into manager calls, results into messages, and domain
// errors into gRPC statuses, once, in toStatus.
package server

import (
	"context"
	"errors"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/lease"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	"github.com/codeexec/codeexec/sandboxd/internal/session"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Register adds SandboxService, served by m, to g. files reads the
// workspace files of durable sessions; nil refuses ReadFile.
func Register(g *grpc.Server, m *session.Manager, files Files, logger *slog.Logger) {
	sandboxv1.RegisterSandboxServiceServer(g, &server{m: m, files: files, logger: logger})
}

// Files reads a file of a session's workspace from its latest stored
// checkpoint (durable.Sessions).
type Files interface {
	ReadFile(ctx context.Context, tenant, handle, path string, minSeq uint64, maxBytes int64) ([]byte, uint64, error)
}

// server implements SandboxService over a session.Manager.
type server struct {
	sandboxv1.UnimplementedSandboxServiceServer
	m      *session.Manager
	files  Files
	logger *slog.Logger
}

func (s *server) CreateSession(ctx context.Context, req *sandboxv1.CreateSessionRequest) (*sandboxv1.CreateSessionResponse, error) {
	info, err := s.m.Create(ctx, req.GetTenant(), req.GetSessionId(), req.GetLabels())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &sandboxv1.CreateSessionResponse{Session: toProto(info)}, nil
}

func (s *server) Execute(req *sandboxv1.ExecuteRequest, stream sandboxv1.SandboxService_ExecuteServer) error {
	ctx := stream.Context()
	if req.GetSessionId() == "" {
		return status.Error(codes.InvalidArgument, "session_id is required: create a session with CreateSession first")
	}
	if req.GetCode() == "" && !req.GetAttach() {
		return status.Error(codes.InvalidArgument, "code is empty: send the Python source to run, or attach to wait for the run in flight")
	}
	if req.GetCode() != "" && req.GetAttach() {
		return status.Error(codes.InvalidArgument, "attach takes no code: it waits for the session's run in flight")
	}
	if req.GetMaxToolCalls() < 0 {
		return status.Errorf(codes.InvalidArgument, "max_tool_calls is %d; give 0 (no limit) or a positive number", req.GetMaxToolCalls())
	}
	// The run's events and its questions come from different goroutines;
	// a stream takes one Send at a time.
	var mu sync.Mutex
	send := func(r *sandboxv1.ExecuteResponse) error {
		mu.Lock()
		defer mu.Unlock()
		return stream.Send(r)
	}
	res, err := s.m.Execute(ctx, session.Request{
		Tenant:       req.GetTenant(),
		SessionID:    req.GetSessionId(),
		Code:         req.GetCode(),
		Servers:      req.GetServers(),
		Timeout:      req.GetTimeout().AsDuration(),
		YieldAfter:   req.GetYieldAfter().AsDuration(),
		Attach:       req.GetAttach(),
		Replay:       req.GetReplay(),
		Quiet:        req.GetQuiet(),
		RunID:        req.GetRunId(),
		MaxToolCalls: int(req.GetMaxToolCalls()),
		AskApprovals: req.GetAskApprovals(),
	}, func(ev session.Event) error { return send(eventToProto(ev)) })
	if res == nil {
		return s.toStatus(ctx, err)
	}
	return send(&sandboxv1.ExecuteResponse{Event: &sandboxv1.ExecuteResponse_Result{Result: resultToProto(res)}})
}

// decisions maps the proto's decisions onto the sandbox's.
var decisions = map[sandboxv1.ApprovalDecision]sandbox.Decision{
	sandboxv1.ApprovalDecision_APPROVAL_DECISION_ACCEPT:      sandbox.Accept,
	sandboxv1.ApprovalDecision_APPROVAL_DECISION_DECLINE:     sandbox.Decline,
	sandboxv1.ApprovalDecision_APPROVAL_DECISION_CANCEL:      sandbox.Cancel,
	sandboxv1.ApprovalDecision_APPROVAL_DECISION_UNAVAILABLE: sandbox.Unavailable,
}

func (s *server) AnswerApproval(ctx context.Context, req *sandboxv1.AnswerApprovalRequest) (*sandboxv1.AnswerApprovalResponse, error) {
	d, ok := decisions[req.GetDecision()]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "decision %v is not an answer; give ACCEPT, DECLINE, CANCEL or UNAVAILABLE", req.GetDecision())
	}
	if req.GetApprovalId() == "" || req.GetSessionId() == "" {
		return nil, status.Error(codes.InvalidArgument, "session_id and approval_id are required: the session and the id of the ApprovalRequest answered")
	}
	err := s.m.Answer(ctx, req.GetTenant(), req.GetSessionId(), req.GetApprovalId(), sandbox.Answer{Decision: d, Reason: req.GetReason()})
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &sandboxv1.AnswerApprovalResponse{}, nil
}

func questionToProto(q session.Question) *sandboxv1.ApprovalRequest {
	r := &sandboxv1.ApprovalRequest{Id: q.ID, Server: q.Server, Tool: q.Tool, ArgumentsJson: q.Arguments, Reason: q.Reason, RunId: q.RunID}
	if !q.Deadline.IsZero() {
		r.Deadline = timestamppb.New(q.Deadline)
	}
	return r
}

// eventToProto is the Execute stream's message of one event of a run.
func eventToProto(ev session.Event) *sandboxv1.ExecuteResponse {
	if q := ev.Question; q != nil {
		return &sandboxv1.ExecuteResponse{Event: &sandboxv1.ExecuteResponse_Approval{Approval: questionToProto(*q)}}
	}
	if d := ev.Display; d != nil {
		return &sandboxv1.ExecuteResponse{Event: &sandboxv1.ExecuteResponse_Display{
			Display: &sandboxv1.DisplayData{MimeType: d.MIME, Data: d.Image(), Width: int32(d.Width), Height: int32(d.Height)},
		}}
	}
	if p := ev.Progress; p != nil {
		return &sandboxv1.ExecuteResponse{Event: &sandboxv1.ExecuteResponse_Progress{
			Progress: &sandboxv1.Progress{Done: p.Done, Total: p.Total, Message: p.Message},
		}}
	}
	st := sandboxv1.Stream_STREAM_STDOUT
	if ev.Stream == "stderr" {
		st = sandboxv1.Stream_STREAM_STDERR
	}
	return &sandboxv1.ExecuteResponse{Event: &sandboxv1.ExecuteResponse_Output{
		Output: &sandboxv1.OutputChunk{Stream: st, Text: ev.Text},
	}}
}

func (s *server) CancelExecution(ctx context.Context, req *sandboxv1.CancelExecutionRequest) (*sandboxv1.CancelExecutionResponse, error) {
	ok, err := s.m.Cancel(ctx, req.GetTenant(), req.GetSessionId(), req.GetRunId(), req.GetReason())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &sandboxv1.CancelExecutionResponse{Cancelled: ok}, nil
}

func (s *server) ResetSession(ctx context.Context, req *sandboxv1.ResetSessionRequest) (*sandboxv1.ResetSessionResponse, error) {
	info, err := s.m.Reset(ctx, req.GetTenant(), req.GetSessionId())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &sandboxv1.ResetSessionResponse{Session: toProto(info)}, nil
}

func (s *server) DestroySession(ctx context.Context, req *sandboxv1.DestroySessionRequest) (*sandboxv1.DestroySessionResponse, error) {
	if err := s.m.Destroy(ctx, req.GetTenant(), req.GetSessionId()); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &sandboxv1.DestroySessionResponse{}, nil
}

func (s *server) GetSession(ctx context.Context, req *sandboxv1.GetSessionRequest) (*sandboxv1.GetSessionResponse, error) {
	sess, err := s.m.Get(req.GetTenant(), req.GetSessionId())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &sandboxv1.GetSessionResponse{Session: toProto(sess.Info())}, nil
}

func (s *server) ReadFile(ctx context.Context, req *sandboxv1.ReadFileRequest) (*sandboxv1.ReadFileResponse, error) {
	if s.files == nil {
		return nil, status.Error(codes.FailedPrecondition, "files are read from the session's checkpoints, and this sandboxd keeps none: run it with a session store (memoryd)")
	}
	p := req.GetPath()
	if p == "" || path.Clean(p) != p || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "../") || p == ".." {
		return nil, status.Errorf(codes.InvalidArgument, "path %q is not a clean path relative to /workspace, such as out/chart.png", p)
	}
	data, seq, err := s.files.ReadFile(ctx, req.GetTenant(), req.GetSessionId(), p, req.GetMinExecCount(), req.GetMaxBytes())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &sandboxv1.ReadFileResponse{Data: data, ExecCount: seq}, nil
}

func (s *server) ListSessions(_ context.Context, req *sandboxv1.ListSessionsRequest) (*sandboxv1.ListSessionsResponse, error) {
	infos := s.m.List(req.GetTenant())
	resp := &sandboxv1.ListSessionsResponse{Sessions: make([]*sandboxv1.Session, 0, len(infos))}
	for _, info := range infos {
		resp.Sessions = append(resp.Sessions, toProto(info))
	}
	return resp, nil
}

// toStatus translates a domain error into a gRPC status, once. Internal
// causes are logged and not sent to the caller.
func (s *server) toStatus(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return err
	}
	// The sentinels classify; the text after them is the message.
	msg := func(sentinel error) string { return strings.TrimPrefix(err.Error(), sentinel.Error()+": ") }
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case errors.Is(err, session.ErrNotFound):
		return status.Error(codes.NotFound, msg(session.ErrNotFound))
	case errors.Is(err, session.ErrInvalid):
		return status.Error(codes.InvalidArgument, msg(session.ErrInvalid))
	case errors.Is(err, session.ErrExhausted):
		return status.Error(codes.ResourceExhausted, msg(session.ErrExhausted))
	case errors.Is(err, session.ErrExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, session.ErrPaused):
		// Not UNAVAILABLE: a gateway takes that for a replica it cannot
		// reach, and gives up every session routed to it.
		return status.Error(codes.Aborted, msg(session.ErrPaused))
	case errors.Is(err, lease.ErrUnknown):
		return status.Error(codes.NotFound, "unknown session: it has ended or expired, or it belongs to another tenant")
	case errors.Is(err, lease.ErrNoFile):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, lease.ErrFileTooLarge), errors.Is(err, lease.ErrNotYet):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, lease.ErrFenced):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, engine.ErrUnavailable):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	if busy := (*session.BusyError)(nil); errors.As(err, &busy) {
		st, derr := status.New(codes.FailedPrecondition, busy.Error()).WithDetails(&sandboxv1.RunInFlight{
			RunId: busy.RunID, StartTime: timestamppb.New(busy.Started), Timeout: durationpb.New(busy.Timeout),
		})
		if derr != nil {
			return status.Error(codes.FailedPrecondition, busy.Error())
		}
		return st.Err()
	}
	var elsewhere *session.ElsewhereError
	if errors.As(err, &elsewhere) {
		st, derr := status.New(codes.FailedPrecondition, elsewhere.Error()).WithDetails(&sandboxv1.SessionElsewhere{
			Replica: elsewhere.Replica, Address: elsewhere.Address,
		})
		if derr != nil {
			return status.Error(codes.FailedPrecondition, elsewhere.Error())
		}
		return st.Err()
	}
	s.logger.ErrorContext(ctx, "sandbox request failed", logkeys.Error, err)
	return status.Error(codes.Internal, "sandboxd internal error; see the sandboxd log")
}

func toProto(info session.Info) *sandboxv1.Session {
	st := map[session.State]sandboxv1.SessionState{
		session.StateIdle:    sandboxv1.SessionState_SESSION_STATE_IDLE,
		session.StateBusy:    sandboxv1.SessionState_SESSION_STATE_BUSY,
		session.StateStopped: sandboxv1.SessionState_SESSION_STATE_STOPPED,
	}[info.State]
	return &sandboxv1.Session{
		Id:           info.ID,
		Tenant:       info.Tenant,
		State:        st,
		CreateTime:   timestamppb.New(info.Created),
		LastUsedTime: timestamppb.New(info.LastUsed),
		ExecCount:    info.ExecCount,
		Generation:   info.Generation,
		Runtime:      info.Runtime,
		Labels:       info.Labels,
	}
}

func resultToProto(r *session.Result) *sandboxv1.ExecResult {
	st := map[sandbox.Status]sandboxv1.ExecStatus{
		sandbox.StatusOK:      sandboxv1.ExecStatus_EXEC_STATUS_OK,
		sandbox.StatusError:   sandboxv1.ExecStatus_EXEC_STATUS_ERROR,
		sandbox.StatusTimeout: sandboxv1.ExecStatus_EXEC_STATUS_TIMEOUT,
		sandbox.StatusKilled:  sandboxv1.ExecStatus_EXEC_STATUS_KILLED,
		sandbox.StatusRunning: sandboxv1.ExecStatus_EXEC_STATUS_RUNNING,
		sandbox.StatusNoRun:   sandboxv1.ExecStatus_EXEC_STATUS_NO_RUN,
	}[r.Status]
	var started *timestamppb.Timestamp
	if !r.Started.IsZero() {
		started = timestamppb.New(r.Started)
	}
	return &sandboxv1.ExecResult{
		Status:             st,
		ExitCode:           int32(r.ExitCode),
		Error:              r.Error,
		Duration:           durationpb.New(r.Duration),
		StateLost:          r.StateLost,
		StdoutDroppedBytes: uint64(r.Dropped["stdout"]),
		StderrDroppedBytes: uint64(r.Dropped["stderr"]),
		Servers:            r.Servers,
		Timeout:            durationpb.New(r.Timeout.Round(time.Millisecond)),
		Session:            toProto(r.Session),
		Restored:           restoreToProto(r.Restored),
		NotDurable:         r.NotDurable,
		Durable:            r.Durable,
		Ended:              r.Ended,
		Uncheckpointed:     lostToProto(r.Uncheckpointed),
		TimeoutNote:        r.TimeoutNote,
		Files:              filesToProto(r.Files),
		FilesMore:          uint32(min(r.FilesMore, 1<<20)),
		RunId:              r.RunID,
		Interrupted:        r.Interrupted,
		StartTime:          started,
	}
}

func filesToProto(files []channel.OutFile) []*sandboxv1.OutputFile {
	out := make([]*sandboxv1.OutputFile, 0, len(files))
	for _, f := range files {
		out = append(out, &sandboxv1.OutputFile{Path: f.Path, Size: f.Bytes, MimeType: f.MIME})
	}
	return out
}

func lostToProto(names []channel.LostName) []*sandboxv1.LostName {
	out := make([]*sandboxv1.LostName, 0, len(names))
	for _, l := range names {
		out = append(out, &sandboxv1.LostName{Name: l.Name, Kind: l.Type, Why: l.Why})
	}
	return out
}

func restoreToProto(r *session.RestoreReport) *sandboxv1.RestoreReport {
	if r == nil {
		return nil
	}
	return &sandboxv1.RestoreReport{Reason: r.Reason, Names: r.Names, Files: r.Files, Lost: lostToProto(r.Lost), RolledBack: r.RolledBack, Calls: r.Calls, Missed: r.Missed, MissedWhy: r.MissedWhy, Environment: r.Environment, Fresh: r.Fresh}
}
