package discoveryd_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
)

func TestSearchAndDocs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := start(t, realServers(t, dir), nil)
	ctx := t.Context()

	// Nothing is listed yet: an unfiltered search says what it skipped.
	resp, err := e.client.SearchTools(ctx, &discoveryv1.SearchToolsRequest{Query: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetDocs()) != 0 || strings.Join(resp.GetUnindexedServers(), ",") != "everything,filesystem,memory" {
		t.Errorf("search before listing: docs %v, unindexed %v", resp.GetDocs(), resp.GetUnindexedServers())
	}

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

	// An exact tool name ranks first; limit is clamped; summary has no schema.
	resp, err = e.client.SearchTools(ctx, &discoveryv1.SearchToolsRequest{Query: "get_sum", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetDocs()[0]; d.GetTool() != "get-sum" || d.GetToolAlias() != "get_sum" || d.GetServerAlias() != "everything" || d.GetInputSchemaJson() != "" {
		t.Errorf("first hit for get_sum = %v", d)
	}
	if slices.Contains(resp.GetUnindexedServers(), "everything") || !slices.Contains(resp.GetUnindexedServers(), "memory") {
		t.Errorf("unindexed = %v, want memory only", resp.GetUnindexedServers())
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
