package broker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/sandboxd/internal/channel"
)

// failingDiscovery is fakeDiscovery whose tool calls fail with err.
type failingDiscovery struct {
	fakeDiscovery
	err error
}

func (f *failingDiscovery) CallTool(context.Context, *discoveryv1.CallToolRequest, ...grpc.CallOption) (*discoveryv1.CallToolResponse, error) {
	return nil, f.err
}

// failingMemory fails every memory and tool request with err. The
// embedded interfaces are nil: a method not overridden here panics.
type failingMemory struct {
	memoryv1.MemoryServiceClient
	memoryv1.ToolServiceClient
	err error
}

func (f *failingMemory) GetMemory(context.Context, *memoryv1.GetMemoryRequest, ...grpc.CallOption) (*memoryv1.GetMemoryResponse, error) {
	return nil, f.err
}

func (f *failingMemory) UpdateMemory(context.Context, *memoryv1.UpdateMemoryRequest, ...grpc.CallOption) (*memoryv1.UpdateMemoryResponse, error) {
	return nil, f.err
}

func (f *failingMemory) DeleteTool(context.Context, *memoryv1.DeleteToolRequest, ...grpc.CallOption) (*memoryv1.DeleteToolResponse, error) {
	return nil, f.err
}

func TestEveryMethodHasAHandler(t *testing.T) {
	t.Parallel()
	var want, got []string
	for _, r := range channel.Requests() {
		want = append(want, r.Method())
	}
	for name := range methods {
		got = append(got, name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		t.Errorf("broker handlers %v, want one per channel request %v", got, want)
	}
}

// TestCallErrors holds each kind of failure to its code and message, as
// the agent sees them.
func TestCallErrors(t *testing.T) {
	t.Parallel()
	disc := func(err error) *Broker {
		return &Broker{Discovery: &failingDiscovery{fakeDiscovery{servers: []string{"a", "b"}}, err}}
	}
	mem := func(err error) *Broker {
		m := &failingMemory{err: err}
		return &Broker{Memory: m, Tools: m}
	}
	for _, tc := range []struct {
		name           string
		broker         *Broker
		method, params string
		code           channel.Code
		msg            string
	}{
		{"unknown method", disc(nil), "memory.frobnicate", `{}`, channel.CodeInvalidArgument, `unknown request "memory.frobnicate" from the sandbox`},
		{"unknown parameter", disc(nil), "list_tools", `{"server":"a","tool":"x"}`, channel.CodeInvalidArgument, `bad parameters for list_tools: json: unknown field "tool"`},
		{"parameter of the wrong type", disc(nil), "search_tool_docs", `{"query":"x","limit":"5"}`, channel.CodeInvalidArgument, "bad parameters for search_tool_docs: json: cannot unmarshal"},
		{"parameters not an object", disc(nil), "list_tools", `["a"]`, channel.CodeInvalidArgument, "bad parameters for list_tools"},
		{"data after the parameters", disc(nil), "list_tools", `{"server":"a"} {}`, channel.CodeInvalidArgument, "data after the parameters object"},
		{"missing server", disc(nil), "list_tools", `{}`, channel.CodeInvalidArgument, "missing server name"},
		{"server not loaded", disc(nil), "call_tool", `{"server":"b","tool":"t","arguments":{}}`, channel.CodePermissionDenied, "Server 'b' is not available"},
		{"missing tool", disc(nil), "call_tool", `{"server":"a","arguments":{}}`, channel.CodeInvalidArgument, "missing tool name"},
		{"arguments not an object", disc(nil), "call_tool", `{"server":"a","tool":"t","arguments":[1]}`, channel.CodeInvalidArgument, "arguments must be an object"},
		{"bad detail", disc(nil), "query_tool_docs", `{"server":"a","detail":"all"}`, channel.CodeInvalidArgument, `detail must be "summary" or "full", not "all"`},
		{"empty query", disc(nil), "search_tool_docs", `{"query":" ","limit":5,"detail":"summary"}`, channel.CodeInvalidArgument, "Missing 'query' value"},
		{"unknown tool", disc(status.Error(codes.NotFound, `unknown tool "x"`)), "call_tool", `{"server":"a","tool":"x","arguments":{}}`, channel.CodeNotFound, `unknown tool "x"`},
		{"server refused", disc(status.Error(codes.FailedPrecondition, "rejected")), "call_tool", `{"server":"a","tool":"t","arguments":{}}`, channel.CodeFailedPrecondition, "rejected"},
		{"server down", disc(status.Error(codes.Unavailable, "crashed")), "call_tool", `{"server":"a","tool":"t","arguments":{}}`, channel.CodeUnavailable, "unavailable: crashed"},
		{"server slow", disc(status.Error(codes.DeadlineExceeded, "no answer within 3s")), "call_tool", `{"server":"a","tool":"t","arguments":{}}`, channel.CodeDeadlineExceeded, "timed out: no answer within 3s"},
		{"discoveryd bug", disc(status.Error(codes.Internal, "discoveryd: internal error")), "call_tool", `{"server":"a","tool":"t","arguments":{}}`, channel.CodeInternal, "discoveryd: internal error"},
		{"not a status", disc(errors.New("connection reset")), "call_tool", `{"server":"a","tool":"t","arguments":{}}`, channel.CodeInternal, "connection reset"},
		{"context deadline", disc(context.DeadlineExceeded), "call_tool", `{"server":"a","tool":"t","arguments":{}}`, channel.CodeDeadlineExceeded, "timed out: context deadline exceeded"},
		{"no discovery", &Broker{}, "search_tool_docs", `{"query":"x","limit":5,"detail":"summary"}`, channel.CodeUnavailable, "MCP server discovery is not available"},
		{"revision moved", mem(status.Error(codes.Aborted, "revision conflict")), "memory.update", `{"key":"k","value":1,"revision":3}`, channel.CodeConflict, "revision conflict"},
		{"bad key", mem(status.Error(codes.InvalidArgument, "key too long")), "memory.update", `{"key":"k","value":1,"revision":0}`, channel.CodeInvalidArgument, "key too long"},
		{"memoryd closing", mem(status.Error(codes.Unavailable, "memoryd is shutting down")), "tool.delete", `{"name":"f"}`, channel.CodeUnavailable, "unavailable: memoryd is shutting down"},
		{"no memory", &Broker{}, "memory.load", `{"key":"k"}`, channel.CodeUnavailable, "memory and saved tools are not available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var servers []string
			if tc.broker.Discovery != nil {
				servers = []string{"a"}
			}
			_, err := call(t, tc.broker, servers, tc.method, tc.params)
			e, ok := errors.AsType[*channel.Error](err)
			if !ok {
				t.Fatalf("%s(%s) error = %#v, want a *channel.Error", tc.method, tc.params, err)
			}
			if e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("%s(%s) error = %s %q, want %s with %q", tc.method, tc.params, e.Code, e.Message, tc.code, tc.msg)
			}
		})
	}
}

func TestMissingMemoryIsNull(t *testing.T) {
	t.Parallel()
	m := &failingMemory{err: status.Error(codes.NotFound, "no memory")}
	got, err := call(t, &Broker{Memory: m, Tools: m}, nil, "memory.load", `{"key":"k"}`)
	if err != nil || got != "null" {
		t.Errorf("memory.load of a missing key = %s, %v; want null", got, err)
	}
}

// Every gRPC code maps onto some channel code; the ones discoveryd and
// memoryd use onto the ones the agent raises as their own exceptions.
func TestEveryStatusCodeMaps(t *testing.T) {
	t.Parallel()
	for c := codes.OK + 1; c <= codes.Unauthenticated; c++ {
		e := channel.AsError(callError(status.Error(c, "x")))
		if e.Code == "" {
			t.Errorf("%v maps to no code", c)
		}
		if want, ok := codeOf[c]; ok && e.Code != want {
			t.Errorf("%v maps to %s, want %s", c, e.Code, want)
		}
	}
	for _, c := range []codes.Code{codes.Unknown, codes.Internal, codes.Unimplemented, codes.DataLoss} {
		if e := channel.AsError(callError(status.Error(c, "x"))); e.Code != channel.CodeInternal {
			t.Errorf("%v maps to %s, want internal", c, e.Code)
		}
	}
}
