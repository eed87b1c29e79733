package broker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
)

// guardedDiscovery refuses unapproved calls as discoveryd does for a
// marked tool, and records the calls that went out.
type guardedDiscovery struct {
	fakeDiscovery
	made []*discoveryv1.CallToolRequest
}

func (g *guardedDiscovery) CallTool(_ context.Context, req *discoveryv1.CallToolRequest, _ ...grpc.CallOption) (*discoveryv1.CallToolResponse, error) {
	if !req.GetApproved() {
		st, _ := status.New(codes.FailedPrecondition, "needs approval").WithDetails(&discoveryv1.ApprovalRequired{Server: req.GetServer(), Tool: req.GetTool(), Reason: "--approve a.*"})
		return nil, st.Err()
	}
	g.made = append(g.made, req)
	return &discoveryv1.CallToolResponse{ResultJson: `{"content":[]}`}, nil
}

func TestApprovalAsksAndAnswers(t *testing.T) {
	t.Parallel()
	params := `{"server":"a","tool":"a_tool","arguments":{"token":"s3cret","n":1}}`
	for _, tc := range []struct {
		name     string
		controls *sandbox.Controls
		code     channel.Code // "" for a call that runs
		says     string
	}{
		{"accept", &sandbox.Controls{Ask: answer(sandbox.Accept, "")}, "", ""},
		{"decline", &sandbox.Controls{Ask: answer(sandbox.Decline, "")}, channel.CodeApprovalDeclined, "the user declined the call of tool 'a_tool' of server 'a'"},
		{"cancel", &sandbox.Controls{Ask: answer(sandbox.Cancel, "")}, channel.CodeApprovalDeclined, "dismissed the question"},
		{"unavailable", &sandbox.Controls{Ask: answer(sandbox.Unavailable, "the client cannot show questions")}, channel.CodeApprovalUnavailable, "nobody could be asked: the client cannot show questions"},
		{"nobody to ask", nil, channel.CodeApprovalUnavailable, "this call has nobody to ask"},
		{"no answer in time", &sandbox.Controls{Ask: func(ctx context.Context, _ sandbox.Approval) (sandbox.Answer, error) {
			<-ctx.Done()
			return sandbox.Answer{}, ctx.Err()
		}}, channel.CodeDeadlineExceeded, "no answer came"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := &guardedDiscovery{fakeDiscovery: fakeDiscovery{servers: []string{"a"}}}
			b := &Broker{Discovery: d}
			env, err := b.Prepare(t.Context(), "default", []string{"a"})
			if err != nil {
				t.Fatal(err)
			}
			var asked sandbox.Approval
			if c := tc.controls; c != nil {
				inner := c.Ask
				c.Ask = func(ctx context.Context, a sandbox.Approval) (sandbox.Answer, error) {
					asked = a
					return inner(ctx, a)
				}
			}
			env.Controls = tc.controls
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			_, err = b.Call(ctx, "default", env, "call_tool", json.RawMessage(params))
			if tc.code == "" {
				if err != nil || len(d.made) != 1 {
					t.Fatalf("err %v, calls made %d; want the approved call made once", err, len(d.made))
				}
			} else {
				e := channel.AsError(err)
				if e.Code != tc.code || !strings.Contains(e.Message, tc.says) || len(d.made) != 0 {
					t.Fatalf("err %v (%s), calls made %d; want %s saying %q, and no call", err, e.Code, len(d.made), tc.code, tc.says)
				}
			}
			if tc.controls != nil && (asked.Server != "a" || asked.Tool != "a_tool" || asked.Reason != "--approve a.*" || asked.Arguments != `{"n":1,"token":"[masked]"}`) {
				t.Errorf("asked %+v; want the call, its rule and its arguments masked", asked)
			}
		})
	}
}

func answer(d sandbox.Decision, reason string) sandbox.Asker {
	return func(context.Context, sandbox.Approval) (sandbox.Answer, error) {
		return sandbox.Answer{Decision: d, Reason: reason}, nil
	}
}

func TestMaxToolCalls(t *testing.T) {
	t.Parallel()
	b := &Broker{Discovery: &fakeDiscovery{servers: []string{"a"}}}
	env, err := b.Prepare(t.Context(), "default", []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	env.Controls = &sandbox.Controls{MaxToolCalls: 2}
	params := json.RawMessage(`{"server":"a","tool":"a_tool","arguments":{}}`)
	for i := range 2 {
		if _, err := b.Call(t.Context(), "default", env, "call_tool", params); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	for range 2 {
		_, err = b.Call(t.Context(), "default", env, "call_tool", params)
		if e := channel.AsError(err); e.Code != channel.CodeLimitExceeded || !strings.Contains(e.Message, "--max-tool-calls") || !strings.Contains(e.Message, "limit of 2 tool calls per run") {
			t.Fatalf("call past the limit: %v, want limit_exceeded naming the limit", err)
		}
	}
	// Discovery is not a tool call.
	if _, err := b.Call(t.Context(), "default", env, "list_servers", json.RawMessage(`{}`)); err != nil {
		t.Errorf("list_servers after the limit: %v", err)
	}
}
