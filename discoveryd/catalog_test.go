package discoveryd_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/discoveryd"
	"github.com/codeexec/codeexec/memoryd"
	catalogv1 "github.com/codeexec/codeexec/proto/gen/codeexec/catalog/v1"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	"github.com/codeexec/codeexec/services/grpctest"
)

// catalogue runs a memoryd over a bbolt file in dir and returns a client
// of its CatalogService, as codeexec serve wires one.
func catalogue(t *testing.T, dir string) catalogv1.CatalogServiceClient {
	t.Helper()
	svc, err := memoryd.New(memoryd.Config{Path: filepath.Join(dir, "memory.db")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return catalogv1.NewCatalogServiceClient(grpctest.Start(t, svc.Register))
}

// twoServers is a fresh config of two real servers (each start marks its
// own, so the entries are rebuilt every time).
func twoServers(t *testing.T) map[string]any {
	return map[string]any{"everything": stdio(t, "server-everything"), "memory": stdio(t, "server-memory")}
}

// TestSearchFromTheCatalogueStartsNothing: a discoveryd whose servers
// were listed by an earlier one on the same store answers its first
// search, and docs of a server not loaded, without starting a process.
func TestSearchFromTheCatalogueStartsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cat := catalogue(t, dir)
	withCat := func(c *discoveryd.Config) { c.Catalog, c.SearchIndexWait = cat, time.Minute }

	first := start(t, twoServers(t), withCat)
	resp, err := first.client.SearchTools(t.Context(), &discoveryv1.SearchToolsRequest{Query: "echo"})
	if err != nil || len(resp.GetDocs()) == 0 || resp.GetDocs()[0].GetTool() != "echo" {
		t.Fatalf("first process's search: %v, %v", resp, err)
	}
	if len(marked(first.mark)) != 2 {
		t.Fatalf("first process: %d servers running, want both started to list them", len(marked(first.mark)))
	}
	first.close(t) // waits for the catalogue's writes

	second := start(t, twoServers(t), withCat)
	resp, err = second.client.SearchTools(t.Context(), &discoveryv1.SearchToolsRequest{Query: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetUnindexedServers()) != 0 || len(resp.GetDocs()) == 0 || resp.GetDocs()[0].GetServer()+"/"+resp.GetDocs()[0].GetTool() != "everything/echo" {
		t.Errorf("second process's first search: docs %v, unindexed %v; want everything/echo first, nothing unindexed", resp.GetDocs(), resp.GetUnindexedServers())
	}
	resp, err = second.client.SearchTools(t.Context(), &discoveryv1.SearchToolsRequest{Query: "create entities in the knowledge graph", Detail: discoveryv1.Detail_DETAIL_FULL})
	if err != nil || len(resp.GetDocs()) == 0 || resp.GetDocs()[0].GetServer() != "memory" || resp.GetDocs()[0].GetInputSchemaJson() == "" {
		t.Errorf("search of the memory server from the catalogue, full detail: %v, %v", resp, err)
	}
	resp, err = second.client.SearchTools(t.Context(), &discoveryv1.SearchToolsRequest{Query: "echo", Servers: []string{"everything"}})
	if err != nil || len(resp.GetDocs()) == 0 || resp.GetDocs()[0].GetTool() != "echo" || len(resp.GetUnindexedServers()) != 0 {
		t.Errorf("search of one server from the catalogue: %v, %v", resp, err)
	}
	docs, err := second.client.GetToolDocs(t.Context(), &discoveryv1.GetToolDocsRequest{Server: "memory", Tool: "read_graph", KnownOnly: true})
	if err != nil || len(docs.GetDocs()) != 1 || docs.GetDocs()[0].GetTool() != "read_graph" {
		t.Errorf("known-only docs of memory/read_graph: %v, %v", docs, err)
	}
	if pids := marked(second.mark); len(pids) != 0 {
		t.Errorf("the second process started %d servers (pids %v) to answer from a known catalogue, want none", len(pids), pids)
	}

	// Calling a tool starts its server, as ever.
	call, err := second.client.CallTool(t.Context(), &discoveryv1.CallToolRequest{Server: "everything", Tool: "echo", ArgumentsJson: `{"message":"hi"}`})
	if err != nil || !strings.Contains(decode(t, call).text(), "hi") {
		t.Errorf("call after searching from the catalogue: %v, %v", call, err)
	}
	if n := len(marked(second.mark)); n != 1 {
		t.Errorf("%d servers running after one call, want 1", n)
	}
}

// TestAChangedConfigEntryIsListedAgain: the catalogue is keyed by the
// config entry, so a server whose arguments changed is started and
// listed, not answered for with the old entry's tools.
func TestAChangedConfigEntryIsListedAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cat := catalogue(t, dir)
	withCat := func(c *discoveryd.Config) { c.Catalog, c.SearchIndexWait = cat, time.Minute }
	fsDir := t.TempDir()
	first := start(t, map[string]any{"files": stdio(t, "server-filesystem", fsDir)}, withCat)
	if _, err := first.client.SearchTools(t.Context(), &discoveryv1.SearchToolsRequest{Query: "read file"}); err != nil {
		t.Fatal(err)
	}
	first.close(t)

	second := start(t, map[string]any{"files": stdio(t, "server-filesystem", fsDir, t.TempDir())}, withCat)
	if _, err := second.client.SearchTools(t.Context(), &discoveryv1.SearchToolsRequest{Query: "read file"}); err != nil {
		t.Fatal(err)
	}
	if n := len(marked(second.mark)); n != 1 {
		t.Errorf("%d servers started for a changed config entry, want 1", n)
	}
}

// aging stores every entry as if listed two minutes ago by a server that
// said its list keeps for one minute (ttlMs).
type aging struct {
	catalogv1.CatalogServiceClient
}

func (a aging) PutCatalog(ctx context.Context, req *catalogv1.PutCatalogRequest, opts ...grpc.CallOption) (*catalogv1.PutCatalogResponse, error) {
	c := proto.Clone(req.GetCatalog()).(*catalogv1.Catalog)
	ttl := int64(60_000)
	c.TtlMs, c.ListedAt = &ttl, timestamppb.New(time.Now().Add(-2*time.Minute))
	return a.CatalogServiceClient.PutCatalog(ctx, &catalogv1.PutCatalogRequest{Catalog: c}, opts...)
}

// TestAStaleCatalogueEntryIsNotUsed: an entry older than the server's own
// ttlMs is not searched; the server is started and listed instead, and
// known-only docs say the tools are not known.
func TestAStaleCatalogueEntryIsNotUsed(t *testing.T) {
	t.Parallel()
	cat := catalogue(t, t.TempDir())
	first := start(t, twoServers(t), func(c *discoveryd.Config) { c.Catalog, c.SearchIndexWait = aging{cat}, time.Minute })
	if _, err := first.client.SearchTools(t.Context(), &discoveryv1.SearchToolsRequest{Query: "echo"}); err != nil {
		t.Fatal(err)
	}
	first.close(t)

	second := start(t, twoServers(t), func(c *discoveryd.Config) { c.Catalog, c.SearchIndexWait = cat, time.Minute })
	_, err := second.client.GetToolDocs(t.Context(), &discoveryv1.GetToolDocsRequest{Server: "memory", KnownOnly: true})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("known-only docs from a stale entry: %v, want FAILED_PRECONDITION", err)
	}
	resp, err := second.client.SearchTools(t.Context(), &discoveryv1.SearchToolsRequest{Query: "echo"})
	if err != nil || len(resp.GetDocs()) == 0 {
		t.Fatalf("search: %v, %v", resp, err)
	}
	if n := len(marked(second.mark)); n != 2 {
		t.Errorf("%d servers started past their entries' ttlMs, want 2", n)
	}
}

// TestAPrivateListIsSharedOnlyWithTheSameCredentials: a server that
// calls its tool list private (cacheScope) has its entry keyed by its
// environment's values too, so a process whose entry differs only in a
// value (another token) lists the server itself; one whose list is
// public shares the entry.
func TestAPrivateListIsSharedOnlyWithTheSameCredentials(t *testing.T) {
	t.Parallel()
	for _, scope := range []string{"private", "public"} {
		t.Run(scope, func(t *testing.T) {
			t.Parallel()
			cat := catalogue(t, t.TempDir())
			withCat := func(c *discoveryd.Config) { c.Catalog, c.SearchIndexWait = cat, time.Minute }
			fake := func(token string) map[string]any {
				f := fakeServer(t)
				f["env"] = map[string]any{"FAKESERVER_CACHE_SCOPE": scope, "TOKEN": token}
				return map[string]any{"fake": f}
			}
			first := start(t, fake("alice's"), withCat)
			if _, err := first.client.SearchTools(t.Context(), &discoveryv1.SearchToolsRequest{Query: "environment"}); err != nil {
				t.Fatal(err)
			}
			first.close(t)
			second := start(t, fake("bob's"), withCat)
			resp, err := second.client.SearchTools(t.Context(), &discoveryv1.SearchToolsRequest{Query: "environment"})
			if err != nil || len(resp.GetDocs()) == 0 {
				t.Fatalf("search: %v, %v", resp, err)
			}
			want := map[string]int{"private": 1, "public": 0}[scope]
			if n := len(marked(second.mark)); n != want {
				t.Errorf("%s list, another token: %d servers started, want %d", scope, n, want)
			}
		})
	}
}
