package discoveryd_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/discoveryd"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
)

func TestSearchAndDocs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The wait for the servers' first listing is the default's 5 s in
	// production; three Node servers starting beside the whole suite under
	// the race detector took longer than that in CI. What is checked here
	// is that the first search waits for them, not for how long.
	e := start(t, realServers(t, dir), func(c *discoveryd.Config) { c.SearchIndexWait = time.Minute })
	ctx := t.Context()

	// Nothing is listed yet: an unfiltered search starts and indexes every
	// server first, so the first search already finds tools anywhere.
	resp, err := e.client.SearchTools(ctx, &discoveryv1.SearchToolsRequest{Query: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetUnindexedServers()) != 0 || len(resp.GetDocs()) == 0 || resp.GetDocs()[0].GetServer()+"/"+resp.GetDocs()[0].GetTool() != "everything/echo" {
		t.Fatalf("first search: docs %v, unindexed %v; want everything/echo first and nothing unindexed", resp.GetDocs(), resp.GetUnindexedServers())
	}
	if got := resp.GetDocs()[0].GetMatchReason(); got != "exact name" {
		t.Errorf("match reason of everything/echo for \"echo\" = %q, want \"exact name\"", got)
	}
	resp, err = e.client.SearchTools(ctx, &discoveryv1.SearchToolsRequest{Query: "read the contents of a text file", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]bool{}
	for _, d := range resp.GetDocs() {
		servers[d.GetServer()] = true
		if d.GetMatchReason() == "" {
			t.Errorf("%s/%s has no match reason", d.GetServer(), d.GetTool())
		}
	}
	if !servers["everything"] || !servers["filesystem"] || !servers["memory"] {
		t.Errorf("unfiltered search hit servers %v, want all three", servers)
	}
	unfilteredTotal := resp.GetTotal()

	// A filter starts and indexes the servers it names (by name or alias).
	resp, err = e.client.SearchTools(ctx, &discoveryv1.SearchToolsRequest{Query: "read the contents of a text file", Servers: []string{"everything", "filesystem"}, Detail: discoveryv1.Detail_DETAIL_FULL})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetDocs()) != 5 || !resp.GetTruncated() || int(resp.GetTotal()) <= 5 {
		t.Errorf("default limit: %d docs, total %d, truncated %v", len(resp.GetDocs()), resp.GetTotal(), resp.GetTruncated())
	}
	var top []string
	for _, d := range resp.GetDocs() {
		top = append(top, d.GetServer()+"/"+d.GetTool())
		if d.GetInputSchemaJson() == "" {
			t.Errorf("full detail without schema: %v", d)
		}
		if d.GetServer() == "memory" {
			t.Errorf("filtered search returned %v", d)
		}
	}
	if !slices.Contains(top, "filesystem/read_text_file") {
		t.Errorf("top 5 for 'read the contents of a text file' = %v, want filesystem/read_text_file among them", top)
	}
	if len(resp.GetUnindexedServers()) != 0 {
		t.Errorf("unindexed after a filtered search: %v", resp.GetUnindexedServers())
	}
	// Total and truncated count only the servers the filter names.
	if resp.GetTotal() >= unfilteredTotal {
		t.Errorf("filtered total %d, unfiltered %d; the filter should count fewer", resp.GetTotal(), unfilteredTotal)
	}
	resp, err = e.client.SearchTools(ctx, &discoveryv1.SearchToolsRequest{Query: "read the contents of a text file", Servers: []string{"memory"}, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if int(resp.GetTotal()) != len(resp.GetDocs()) || resp.GetTruncated() || len(resp.GetDocs()) == 0 {
		t.Errorf("memory-only search: %d docs, total %d, truncated %v", len(resp.GetDocs()), resp.GetTotal(), resp.GetTruncated())
	}
	for _, d := range resp.GetDocs() {
		if d.GetServer() != "memory" {
			t.Errorf("memory-only search returned %s/%s", d.GetServer(), d.GetTool())
		}
	}

	// An exact tool name ranks first; limit is clamped; summary has no schema.
	resp, err = e.client.SearchTools(ctx, &discoveryv1.SearchToolsRequest{Query: "get_sum", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetDocs()[0]; d.GetTool() != "get-sum" || d.GetToolAlias() != "get_sum" || d.GetServerAlias() != "everything" || d.GetInputSchemaJson() != "" {
		t.Errorf("first hit for get_sum = %v", d)
	}
	if len(resp.GetUnindexedServers()) != 0 {
		t.Errorf("unindexed = %v, want none", resp.GetUnindexedServers())
	}

	// Docs: all tools in summary, one tool (case-insensitive alias) in full.
	docs, err := e.client.GetToolDocs(ctx, &discoveryv1.GetToolDocsRequest{Server: "everything"})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs.GetDocs()) < 5 || docs.GetDocs()[0].GetInputSchemaJson() != "" {
		t.Errorf("summary docs: %d docs, first %v", len(docs.GetDocs()), docs.GetDocs()[0])
	}
	docs, err = e.client.GetToolDocs(ctx, &discoveryv1.GetToolDocsRequest{Server: "everything", Tool: "GET_SUM", Detail: discoveryv1.Detail_DETAIL_FULL})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs.GetDocs()) != 1 || docs.GetDocs()[0].GetTool() != "get-sum" || !strings.Contains(docs.GetDocs()[0].GetInputSchemaJson(), `"a"`) {
		t.Errorf("full doc for GET_SUM = %v", docs.GetDocs())
	}
}

// An unfiltered search waits a bounded time for unlisted servers: one that
// cannot start and one that is too slow stay unindexed and are named; the
// slow one keeps starting in the background and is searched once it is up.
// A server whose start failed is retried in the background by the next
// search, without that search waiting for it.
func TestSearchIndexesEveryServerWithinABound(t *testing.T) {
	t.Parallel()
	fake := fakeServer(t)
	script := fake["args"].([]any)[0].(string)
	flag := filepath.Join(t.TempDir(), "ready")
	e := start(t, map[string]any{
		"fast":   fake,
		"slow":   map[string]any{"command": fake["command"], "args": []any{script, "--start-delay", "3"}},
		"broken": map[string]any{"command": filepath.Join(t.TempDir(), "no-such-server")},
		// flaky fails to start until the flag file exists.
		"flaky": map[string]any{"command": "/bin/sh", "args": []any{"-c", "test -f '" + flag + "' || exit 2; exec '" + fake["command"].(string) + "' '" + script + "'"}},
	}, func(c *discoveryd.Config) { c.SearchIndexWait = time.Second })
	ctx := t.Context()
	search := func() *discoveryv1.SearchToolsResponse {
		t.Helper()
		resp, err := e.client.SearchTools(ctx, &discoveryv1.SearchToolsRequest{Query: "echo the text back", Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	resp := search()
	if got := strings.Join(resp.GetUnindexedServers(), ","); got != "broken,flaky,slow" {
		t.Errorf("unindexed after the first search = %q, want broken,flaky,slow", got)
	}
	if len(resp.GetDocs()) == 0 || resp.GetDocs()[0].GetServer() != "fast" || resp.GetDocs()[0].GetTool() != "echo" {
		t.Errorf("first search docs = %v, want fast/echo first", resp.GetDocs())
	}
	for _, d := range resp.GetDocs() {
		if d.GetServer() != "fast" {
			t.Errorf("hit on a server that was not indexed: %v", d)
		}
	}

	// flaky can start now; the next search retries it in the background.
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if resp := search(); !slices.Contains(resp.GetUnindexedServers(), "broken") {
		t.Errorf("unindexed after the second search = %v, want broken among them", resp.GetUnindexedServers())
	}

	// slow and flaky come up on their own; ListServers starts nothing, so
	// this only watches the background listings.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		list, err := e.client.ListServers(ctx, &discoveryv1.ListServersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		up := 0
		for _, s := range list.GetServers() {
			if (s.GetName() == "slow" || s.GetName() == "flaky") && s.GetStatus() == discoveryv1.ServerStatus_SERVER_STATUS_RUNNING && s.GetToolCount() > 0 {
				up++
			}
		}
		if up == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slow and flaky were never indexed in the background: %v", list.GetServers())
		}
	}
	resp = search()
	if got := strings.Join(resp.GetUnindexedServers(), ","); got != "broken" {
		t.Errorf("unindexed after slow and flaky came up = %q, want broken", got)
	}
	var hits []string
	for _, d := range resp.GetDocs() {
		hits = append(hits, d.GetServer()+"/"+d.GetTool())
	}
	for _, want := range []string{"fast/echo", "slow/echo", "flaky/echo"} {
		if !slices.Contains(hits, want) {
			t.Errorf("last search hits = %v, want %s among them", hits, want)
		}
	}
	list, err := e.client.ListServers(ctx, &discoveryv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.GetServers() {
		if s.GetName() == "broken" && (s.GetStatus() != discoveryv1.ServerStatus_SERVER_STATUS_FAILED || !strings.Contains(s.GetLastError(), "no-such-server")) {
			t.Errorf("broken server: status %v, last error %q", s.GetStatus(), s.GetLastError())
		}
	}
}

// A server slower to start than the tool-call timeout is still searched by
// the first search, which waits for starts up to SearchIndexWait: the start
// is bounded by the start timeout, and only the listing after it by the
// call timeout.
func TestFirstSearchWaitsForAStartLongerThanACall(t *testing.T) {
	t.Parallel()
	fake := fakeServer(t)
	script := fake["args"].([]any)[0].(string)
	e := start(t, map[string]any{
		"slow": map[string]any{"command": fake["command"], "args": []any{script, "--start-delay", "2"}},
	}, func(c *discoveryd.Config) {
		c.CallTimeout = time.Second
		c.SearchIndexWait = 30 * time.Second
	})
	resp, err := e.client.SearchTools(t.Context(), &discoveryv1.SearchToolsRequest{Query: "echo the text back"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetUnindexedServers()) != 0 || len(resp.GetDocs()) == 0 || resp.GetDocs()[0].GetTool() != "echo" {
		t.Errorf("first search: docs %v, unindexed %v; want slow/echo first and every server searched", resp.GetDocs(), resp.GetUnindexedServers())
	}
}
