package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	"github.com/codeexec/codeexec/sandboxd/internal/channel"
)

// fakeDiscovery is a hand-written DiscoveryServiceClient: the configured
// servers, each with one tool named after it, and a search that returns
// one doc per server.
type fakeDiscovery struct {
	servers []string
	known   []string // servers whose tools a known_only GetToolDocs finds
}

func (f *fakeDiscovery) ListServers(context.Context, *discoveryv1.ListServersRequest, ...grpc.CallOption) (*discoveryv1.ListServersResponse, error) {
	resp := &discoveryv1.ListServersResponse{}
	for _, s := range f.servers {
		resp.Servers = append(resp.Servers, &discoveryv1.Server{Name: s, Alias: s})
	}
	return resp, nil
}

func (f *fakeDiscovery) ListTools(_ context.Context, req *discoveryv1.ListToolsRequest, _ ...grpc.CallOption) (*discoveryv1.ListToolsResponse, error) {
	for _, s := range f.servers {
		if s == req.GetServer() {
			return &discoveryv1.ListToolsResponse{Server: &discoveryv1.Server{Name: s, Alias: s},
				Tools: []*discoveryv1.Tool{{Name: s + "_tool", Alias: s + "_tool"}}}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "unknown server %q", req.GetServer())
}

// GetToolDocs answers as discoveryd does: a known_only request for a
// server whose tools are not known (none of f.known) fails with
// FAILED_PRECONDITION.
func (f *fakeDiscovery) GetToolDocs(_ context.Context, req *discoveryv1.GetToolDocsRequest, _ ...grpc.CallOption) (*discoveryv1.GetToolDocsResponse, error) {
	if req.GetKnownOnly() {
		if !slices.Contains(f.known, req.GetServer()) {
			return nil, status.Errorf(codes.FailedPrecondition, "tools not known yet: server %q", req.GetServer())
		}
		return &discoveryv1.GetToolDocsResponse{Docs: []*discoveryv1.ToolDoc{{Server: req.GetServer(), ServerAlias: req.GetServer(), Tool: "t", ToolAlias: "t"}}}, nil
	}
	return &discoveryv1.GetToolDocsResponse{}, nil
}

func (f *fakeDiscovery) SearchTools(context.Context, *discoveryv1.SearchToolsRequest, ...grpc.CallOption) (*discoveryv1.SearchToolsResponse, error) {
	resp := &discoveryv1.SearchToolsResponse{}
	for _, s := range f.servers {
		resp.Docs = append(resp.Docs, &discoveryv1.ToolDoc{Server: s, ServerAlias: s, Tool: s + "_tool", ToolAlias: s + "_tool"})
	}
	resp.Total = int32(len(resp.GetDocs()))
	return resp, nil
}

func (f *fakeDiscovery) CallTool(context.Context, *discoveryv1.CallToolRequest, ...grpc.CallOption) (*discoveryv1.CallToolResponse, error) {
	return &discoveryv1.CallToolResponse{ResultJson: `{"content":[]}`}, nil
}

func call(t *testing.T, b *Broker, servers []string, method, params string) (string, error) {
	t.Helper()
	env, err := b.Prepare(t.Context(), "default", servers)
	if err != nil {
		t.Fatalf("Prepare(%v): %v", servers, err)
	}
	out, err := b.Call(t.Context(), "default", env, method, json.RawMessage(params))
	return string(out), err
}

func TestListServersIsNeverNull(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		broker  *Broker
		servers []string
		want    string
	}{
		{"no servers asked for", &Broker{Discovery: &fakeDiscovery{servers: []string{"a"}}}, nil, `[]`},
		{"blank names only", &Broker{Discovery: &fakeDiscovery{servers: []string{"a"}}}, []string{" ", ""}, `[]`},
		{"no discovery", &Broker{}, nil, `[]`},
		{"duplicates dropped", &Broker{Discovery: &fakeDiscovery{servers: []string{"a", "b"}}}, []string{"b", "a", "b"}, `["b","a"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := call(t, tc.broker, tc.servers, "list_servers", `{}`)
			if err != nil || got != tc.want {
				t.Errorf("list_servers = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func TestSearchHitsSayHowToLoadTheirServer(t *testing.T) {
	t.Parallel()
	b := &Broker{Discovery: &fakeDiscovery{servers: []string{"files", `odd "name" <x>`}}}
	got, err := call(t, b, []string{"files"}, "search_tool_docs", `{"query":"anything","limit":5}`)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal([]byte(got), &res); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"server": "files", "loaded": true, "loadWith": `servers=["files"]`},
		{"server": `odd "name" <x>`, "loaded": false, "loadWith": `servers=["odd \"name\" <x>"]`},
	}
	if len(res.Results) != len(want) {
		t.Fatalf("results = %s", got)
	}
	for i, w := range want {
		for k, v := range w {
			if res.Results[i][k] != v {
				t.Errorf("hit %d: %s = %v, want %v (%s)", i, k, res.Results[i][k], v, got)
			}
		}
	}
	// Other docs carry neither field.
	docs, err := call(t, b, []string{"files"}, "query_tool_docs", `{"server":"files"}`)
	if err != nil || docs != `[]` {
		t.Errorf("query_tool_docs = %s, %v", docs, err)
	}
	for _, q := range []string{`{"query":""}`, `{"query":"  \t"}`, `{}`} {
		if _, err := call(t, b, nil, "search_tool_docs", q); err == nil || !strings.HasPrefix(err.Error(), "Missing 'query' value") {
			t.Errorf("search_tool_docs(%s) error = %v, want upstream's \"Missing 'query' value\"", q, err)
		}
	}
}

func TestServerNotAvailableSaysUpstreamsWordsThenWhatToDo(t *testing.T) {
	t.Parallel()
	b := &Broker{Discovery: &fakeDiscovery{servers: []string{"a", "b"}}}
	for _, tc := range []struct {
		servers []string
		method  string
		want    string
	}{
		{nil, `call_tool`, `Server 'b' is not available: no servers are loaded in this call; pass servers=["b"] to run_python`},
		{[]string{"a"}, `list_tools`, `Server 'b' is not available: it is not loaded in this call (loaded: "a"); pass servers=["a", "b"] to run_python`},
		{[]string{"a"}, `query_tool_docs`, `Server 'b' is not available: it is not loaded in this call (loaded: "a"); pass servers=["a", "b"] to run_python`},
	} {
		params := map[string]string{"call_tool": `{"server":"b","tool":"t","arguments":{}}`, "list_tools": `{"server":"b"}`,
			"query_tool_docs": `{"server":"b","tool":"t","detail":"summary"}`}[tc.method]
		_, err := call(t, b, tc.servers, tc.method, params)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s with servers %v: %v\nwant %s", tc.method, tc.servers, err, tc.want)
		}
	}
}

// TestQueryToolDocsOfAServerNotLoaded: docs of a server the call did not
// load come from what discoveryd knows without starting it; a server
// whose tools are not known still gets the error that says how to load it.
func TestQueryToolDocsOfAServerNotLoaded(t *testing.T) {
	t.Parallel()
	b := &Broker{Discovery: &fakeDiscovery{servers: []string{"a", "b", "c"}, known: []string{"b"}}}
	got, err := call(t, b, []string{"a"}, "query_tool_docs", `{"server":"b","tool":"t","detail":"summary"}`)
	if err != nil || !strings.Contains(got, `"tool":"t"`) || !strings.Contains(got, `"server":"b"`) {
		t.Errorf("query_tool_docs(b) with servers [a] = %s, %v; want b's doc from the catalogue", got, err)
	}
	_, err = call(t, b, []string{"a"}, "query_tool_docs", `{"server":"c"}`)
	if want := `Server 'c' is not available: it is not loaded in this call (loaded: "a"); pass servers=["a", "c"] to run_python`; err == nil || err.Error() != want {
		t.Errorf("query_tool_docs(c) = %v, want %s", err, want)
	}
}

func TestPyRepr(t *testing.T) {
	t.Parallel()
	// Python's repr() of each string.
	for in, want := range map[string]string{
		"github":     `'github'`,
		"it's":       `"it's"`,
		`say "hi"`:   `'say "hi"'`,
		`it's "x"`:   `'it\'s "x"'`,
		"a\\b\n\t":   `'a\\b\n\t'`,
		"\x00\x7f":   `'\x00\x7f'`,
		"ключ 🔑":     `'ключ 🔑'`,
		"\u200b":     `'\u200b'`,
		"\U000e0001": `'\U000e0001'`,
	} {
		if got := pyRepr(in); got != want {
			t.Errorf("pyRepr(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestUnknownServersAreNamedFewAndCounted(t *testing.T) {
	t.Parallel()
	many := make([]string, 10000)
	for i := range many {
		many[i] = fmt.Sprintf("nope%d", i)
	}
	configured := make([]string, 25)
	for i := range configured {
		configured[i] = fmt.Sprintf("s%02d", i)
	}
	for _, tc := range []struct {
		name    string
		broker  *Broker
		servers []string
		want    string
	}{
		{"one", &Broker{Discovery: &fakeDiscovery{servers: []string{"a", "b"}}}, []string{"a", "x"},
			`invalid argument: unknown MCP server "x"; configured servers: "a", "b"`},
		{"ten thousand", &Broker{Discovery: &fakeDiscovery{servers: []string{"a"}}}, append([]string{"a"}, many...),
			`invalid argument: 10000 unknown MCP servers: "nope0", "nope1", "nope2", "nope3", "nope4" and 9995 more; configured servers: "a"`},
		{"many configured", &Broker{Discovery: &fakeDiscovery{servers: configured}}, []string{"x"},
			`invalid argument: unknown MCP server "x"; configured servers: "s00", "s01", "s02", "s03", "s04", "s05", "s06", "s07", "s08", "s09", ` +
				`"s10", "s11", "s12", "s13", "s14", "s15", "s16", "s17", "s18", "s19" and 5 more (runtime.discovered_servers() lists them all)`},
		{"no discovery", &Broker{}, many[:7],
			`invalid argument: 7 unknown MCP servers: "nope0", "nope1", "nope2", "nope3", "nope4" and 2 more: MCP server discovery is not available in this deployment, so no servers can be loaded; call run_python without 'servers'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.broker.Prepare(t.Context(), "default", tc.servers)
			if err == nil || err.Error() != tc.want {
				t.Errorf("Prepare error:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
}

// downDiscovery is fakeDiscovery whose server "down" cannot start: every
// request for it fails with err.
type downDiscovery struct {
	fakeDiscovery
	err error
}

func (f *downDiscovery) ListTools(ctx context.Context, req *discoveryv1.ListToolsRequest, opts ...grpc.CallOption) (*discoveryv1.ListToolsResponse, error) {
	if req.GetServer() == "down" {
		return nil, f.err
	}
	return f.fakeDiscovery.ListTools(ctx, req, opts...)
}

func (f *downDiscovery) GetToolDocs(ctx context.Context, req *discoveryv1.GetToolDocsRequest, opts ...grpc.CallOption) (*discoveryv1.GetToolDocsResponse, error) {
	if req.GetServer() == "down" {
		return nil, f.err
	}
	return f.fakeDiscovery.GetToolDocs(ctx, req, opts...)
}

// A server that cannot start is allowed in the exec, and its metadata
// carries the error a call to it gets, code and message, so that the
// agent's sync helpers raise what its async ones do.
func TestServerThatCannotStartCarriesItsCallsError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want channel.Error
	}{
		{"unavailable", status.Error(codes.Unavailable, "MCP server failed to start: fork/exec /nonexistent/mcp-ghost: no such file or directory"),
			channel.Error{Code: channel.CodeUnavailable, Message: "unavailable: MCP server failed to start: fork/exec /nonexistent/mcp-ghost: no such file or directory"}},
		{"timed out", status.Error(codes.DeadlineExceeded, "no handshake within 10s"),
			channel.Error{Code: channel.CodeDeadlineExceeded, Message: "timed out: no handshake within 10s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := &Broker{Discovery: &downDiscovery{fakeDiscovery{servers: []string{"up", "down"}}, tc.err}}
			env, err := b.Prepare(t.Context(), "default", []string{"up", "down"})
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			if len(env.Servers) != 2 || env.Servers[0].Error != nil || env.Servers[1].Error == nil {
				t.Fatalf("servers = %+v, want up without an error and down with one", env.Servers)
			}
			if got := *env.Servers[1].Error; got != tc.want {
				t.Errorf("down's error = %+v, want %+v", got, tc.want)
			}
			_, err = b.Call(t.Context(), "default", env, "query_tool_docs", json.RawMessage(`{"server":"down","detail":"summary"}`))
			if e, ok := errors.AsType[*channel.Error](err); !ok || *e != *env.Servers[1].Error {
				t.Errorf("query_tool_docs error = %#v, want the metadata's %+v", err, *env.Servers[1].Error)
			}
		})
	}
}
