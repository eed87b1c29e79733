package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	"github.com/codeexec/codeexec/sandboxd/internal/broker"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	"github.com/codeexec/codeexec/sandboxd/internal/session"
)

// guarded is a DiscoveryServiceClient with one server, "bank", whose one
// tool, "pay", discoveryd would mark for approval: an unapproved call is
// refused with ApprovalRequired.
type guarded struct {
	discoveryv1.DiscoveryServiceClient
	paid []string
}

func (g *guarded) ListServers(context.Context, *discoveryv1.ListServersRequest, ...grpc.CallOption) (*discoveryv1.ListServersResponse, error) {
	return &discoveryv1.ListServersResponse{Servers: []*discoveryv1.Server{{Name: "bank", Alias: "bank"}}}, nil
}

func (g *guarded) ListTools(context.Context, *discoveryv1.ListToolsRequest, ...grpc.CallOption) (*discoveryv1.ListToolsResponse, error) {
	return &discoveryv1.ListToolsResponse{Server: &discoveryv1.Server{Name: "bank", Alias: "bank"}, Tools: []*discoveryv1.Tool{{Name: "pay", Alias: "pay"}}}, nil
}

func (g *guarded) CallTool(_ context.Context, req *discoveryv1.CallToolRequest, _ ...grpc.CallOption) (*discoveryv1.CallToolResponse, error) {
	if !req.GetApproved() {
		st, _ := status.New(codes.FailedPrecondition, "needs approval").WithDetails(&discoveryv1.ApprovalRequired{Server: "bank", Tool: "pay", Reason: "--approve bank.*"})
		return nil, st.Err()
	}
	g.paid = append(g.paid, req.GetArgumentsJson())
	return &discoveryv1.CallToolResponse{ResultJson: `{"content":[{"type":"text","text":"paid"}]}`}, nil
}

// TestApprovalQuestions: a call that needs approval sends its question to
// the caller and waits; Manager.Answer's answer runs it or raises the
// typed exception the code catches, and a question is answered once, by
// its own tenant.
func TestApprovalQuestions(t *testing.T) {
	t.Parallel()
	g := &guarded{}
	r := newReplica(t, nil, "", options{config: func(c *session.Config) { c.Broker = &broker.Broker{Discovery: g} }})
	id := r.create(t)
	code := "try:\n" +
		"    r = await mcp_bank.pay(amount=5, api_key='s3cret')\n" +
		"    print('ran', r['content'][0]['text'])\n" +
		"except runtime.ApprovalDeclinedError as e:\n" +
		"    print('declined', type(e).__name__, isinstance(e, runtime.ToolError), e.server, e.tool)\n"
	for _, tc := range []struct {
		decision sandbox.Decision
		want     string
		paid     int
	}{
		{sandbox.Accept, "ran paid\n", 1},
		{sandbox.Decline, "declined ApprovalDeclinedError True bank pay\n", 1},
		{sandbox.Cancel, "declined ApprovalDeclinedError True bank pay\n", 1},
	} {
		asked := make(chan session.Question, 1)
		var out strings.Builder
		done := make(chan error, 1)
		go func() {
			_, err := r.m.Execute(t.Context(), session.Request{Tenant: "alice", SessionID: id, Code: code, Timeout: 20 * time.Second, Servers: []string{"bank"}, AskApprovals: true},
				func(ev session.Event) error {
					if ev.Question != nil {
						asked <- *ev.Question
					}
					out.WriteString(ev.Text)
					return nil
				})
			done <- err
		}()
		q := <-asked
		if q.Server != "bank" || q.Tool != "pay" || q.Arguments != `{"amount":5,"api_key":"[masked]"}` || q.Deadline.IsZero() {
			t.Fatalf("question %+v: want bank.pay, its arguments masked, and a deadline", q)
		}
		if err := r.m.Answer(t.Context(), "bob", id, q.ID, sandbox.Answer{Decision: sandbox.Accept}); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("another tenant's answer: %v, want ErrNotFound", err)
		}
		if err := r.m.Answer(t.Context(), "alice", id, q.ID, sandbox.Answer{Decision: tc.decision}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want || len(g.paid) != tc.paid {
			t.Errorf("answer %v: printed %q and paid %d times, want %q and %d", tc.decision, out.String(), len(g.paid), tc.want, tc.paid)
		}
		if err := r.m.Answer(t.Context(), "alice", id, q.ID, sandbox.Answer{Decision: sandbox.Accept}); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("a second answer: %v, want ErrNotFound", err)
		}
	}
	// Without a way to ask, the call is refused at once.
	var out strings.Builder
	_, err := r.m.Execute(t.Context(), session.Request{Tenant: "alice", SessionID: id, Servers: []string{"bank"}, Timeout: 20 * time.Second,
		Code: "try:\n    await mcp_bank.pay(amount=1)\nexcept runtime.ApprovalUnavailableError as e:\n    print('refused:', e)\n"},
		func(ev session.Event) error { out.WriteString(ev.Text); return nil })
	if err != nil || !strings.Contains(out.String(), "refused: tool 'pay' of server 'bank' needs a person's approval") {
		t.Errorf("call without a way to ask: %v %q", err, out.String())
	}
}

// TestApprovalOfARunThatYields: a run that outlives its call (YieldAfter)
// asks through its flight; a call that yields leaves the question
// waiting, the next attach gets it again, and once answered the run goes
// on to its end, which that attach (or the next) delivers.
func TestApprovalOfARunThatYields(t *testing.T) {
	t.Parallel()
	g := &guarded{}
	r := newReplica(t, nil, "", options{config: func(c *session.Config) { c.Broker = &broker.Broker{Discovery: g} }})
	id := r.create(t)
	follow := func(req session.Request) (*session.Result, []session.Question, string) {
		t.Helper()
		var qs []session.Question
		var out strings.Builder
		res, err := r.m.Execute(t.Context(), req, func(ev session.Event) error {
			if ev.Question != nil {
				qs = append(qs, *ev.Question)
			}
			out.WriteString(ev.Text)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return res, qs, out.String()
	}
	res, qs, out := follow(session.Request{Tenant: "alice", SessionID: id, Servers: []string{"bank"}, Timeout: 20 * time.Second, AskApprovals: true,
		YieldAfter: 500 * time.Millisecond, Code: "print('before')\nr = await mcp_bank.pay(amount=5)\nprint('after', r['content'][0]['text'])"})
	if res.Status != session.StatusRunning || len(qs) != 1 || qs[0].RunID != res.RunID || out != "before\n" {
		t.Fatalf("first call: %v, questions %+v, output %q; want it running, asked once by its run", res.Status, qs, out)
	}
	attach := session.Request{Tenant: "alice", SessionID: id, Attach: true, YieldAfter: 300 * time.Millisecond, RunID: res.RunID}
	res2, again, _ := follow(attach)
	if res2.Status != session.StatusRunning || len(again) != 1 || again[0].ID != qs[0].ID {
		t.Fatalf("an attach while it waits: %v, questions %+v; want the same question again", res2.Status, again)
	}
	if err := r.m.Answer(t.Context(), "alice", id, qs[0].ID, sandbox.Answer{Decision: sandbox.Accept}); err != nil {
		t.Fatal(err)
	}
	attach.YieldAfter = 20 * time.Second
	end, after, out := follow(attach)
	if end.Status != sandbox.StatusOK || len(after) != 0 || out != "after paid\n" || len(g.paid) != 1 {
		t.Fatalf("after the answer: %v, questions %+v, output %q, paid %d; want it done and paid once", end.Status, after, out, len(g.paid))
	}
}
