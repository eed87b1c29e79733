// Package server implements SandboxService over a session.Manager: it
// turns requests into manager calls, results into messages, and domain
// errors into gRPC statuses, once, in toStatus.
package server

import (
	"context"
	"errors"
	"log/slog"
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

// Register adds SandboxService, served by m, to g.
func Register(g *grpc.Server, m *session.Manager, logger *slog.Logger) {
	sandboxv1.RegisterSandboxServiceServer(g, &server{m: m, logger: logger})
}

// server implements SandboxService over a session.Manager.
type server struct {
	sandboxv1.UnimplementedSandboxServiceServer
	m      *session.Manager
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
	if req.GetCode() == "" {
		return status.Error(codes.InvalidArgument, "code is empty: send the Python source to run")
	}
	if req.GetMaxToolCalls() < 0 {
		return status.Errorf(codes.InvalidArgument, "max_tool_calls is %d; give 0 (no limit) or a positive number", req.GetMaxToolCalls())
	}
	// Output and questions come from different goroutines; a stream takes
	// one Send at a time.
	var mu sync.Mutex
	send := func(r *sandboxv1.ExecuteResponse) error {
		mu.Lock()
		defer mu.Unlock()
		return stream.Send(r)
	}
	r := session.Request{
		Tenant:       req.GetTenant(),
		SessionID:    req.GetSessionId(),
		Code:         req.GetCode(),
		Servers:      req.GetServers(),
		Timeout:      req.GetTimeout().AsDuration(),
		MaxToolCalls: int(req.GetMaxToolCalls()),
	}
	if req.GetAskApprovals() {
		r.Ask = func(q session.Question) error {
			return send(&sandboxv1.ExecuteResponse{Event: &sandboxv1.ExecuteResponse_Approval{Approval: questionToProto(q)}})
		}
	}
	res, err := s.m.Execute(ctx, r, func(name, text string) error {
		st := sandboxv1.Stream_STREAM_STDOUT
		if name == "stderr" {
			st = sandboxv1.Stream_STREAM_STDERR
		}
		return send(&sandboxv1.ExecuteResponse{Event: &sandboxv1.ExecuteResponse_Output{
			Output: &sandboxv1.OutputChunk{Stream: st, Text: text},
		}})
	})
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
	r := &sandboxv1.ApprovalRequest{Id: q.ID, Server: q.Server, Tool: q.Tool, ArgumentsJson: q.Arguments, Reason: q.Reason}
	if !q.Deadline.IsZero() {
		r.Deadline = timestamppb.New(q.Deadline)
	}
	return r
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
	case errors.Is(err, lease.ErrFenced):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, engine.ErrUnavailable):
		return status.Error(codes.FailedPrecondition, err.Error())
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
	}[r.Status]
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
	}
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
	return &sandboxv1.RestoreReport{Reason: r.Reason, Names: r.Names, Lost: lostToProto(r.Lost), RolledBack: r.RolledBack, Calls: r.Calls, Missed: r.Missed, MissedWhy: r.MissedWhy}
}
