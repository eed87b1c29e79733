package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	"github.com/codeexec/codeexec/memoryd/internal/store/bolt"
	"github.com/codeexec/codeexec/memoryd/internal/store/postgres"
	catalogv1 "github.com/codeexec/codeexec/proto/gen/codeexec/catalog/v1"
	"github.com/codeexec/codeexec/services/grpctest"
	"github.com/codeexec/codeexec/services/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// eachStore runs test against a catalogue over a bbolt file and over a
// PostgreSQL database; reopen gives a new store on the same data, as a
// restart does.
func eachStore(t *testing.T, test func(t *testing.T, reopen func() catalogv1.CatalogServiceClient)) {
	t.Run("bolt", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "m.db")
		var last store.Store
		test(t, func() catalogv1.CatalogServiceClient {
			if last != nil {
				_ = last.Close()
			}
			st, err := bolt.Open(path, bolt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			last = st
			t.Cleanup(func() { _ = st.Close() })
			return client(t, st)
		})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := pgtest.NewDatabase(t)
		test(t, func() catalogv1.CatalogServiceClient {
			st, err := postgres.Open(t.Context(), url, postgres.Options{Wait: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return client(t, st)
		})
	})
}

func client(t *testing.T, st store.Store) catalogv1.CatalogServiceClient {
	conn := grpctest.Start(t, func(g *grpc.Server) { New(st, nil).Register(g) })
	return catalogv1.NewCatalogServiceClient(conn)
}

func key(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestCatalogSurvivesARestart(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, reopen func() catalogv1.CatalogServiceClient) {
		c := reopen()
		ttl := int64(60000)
		listed := time.UnixMilli(1_780_000_000_123).UTC()
		a := &catalogv1.Catalog{Key: key("a"), Server: "github", ToolsJson: `[{"name":"create_issue","inputSchema":{"type":"object"}}]`,
			ListedAt: timestamppb.New(listed), TtlMs: &ttl, CacheScope: "private"}
		b := &catalogv1.Catalog{Key: key("b"), Server: "git", ToolsJson: `[]`, ListedAt: timestamppb.New(listed)}
		for _, e := range []*catalogv1.Catalog{a, b} {
			if _, err := c.PutCatalog(t.Context(), &catalogv1.PutCatalogRequest{Catalog: e}); err != nil {
				t.Fatal(err)
			}
		}
		c = reopen()
		got, err := c.GetCatalogs(t.Context(), &catalogv1.GetCatalogsRequest{Keys: []string{key("a"), key("missing"), key("b")}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.GetCatalogs()) != 2 {
			t.Fatalf("got %d entries, want a and b: %v", len(got.GetCatalogs()), got)
		}
		for i, want := range []*catalogv1.Catalog{a, b} {
			if !proto.Equal(got.GetCatalogs()[i], want) {
				t.Errorf("entry %d = %v, want %v", i, got.GetCatalogs()[i], want)
			}
		}
		// A new listing replaces the entry.
		b2 := proto.Clone(b).(*catalogv1.Catalog)
		b2.ToolsJson = `[{"name":"git_status"}]`
		if _, err := c.PutCatalog(t.Context(), &catalogv1.PutCatalogRequest{Catalog: b2}); err != nil {
			t.Fatal(err)
		}
		got, err = c.GetCatalogs(t.Context(), &catalogv1.GetCatalogsRequest{Keys: []string{key("b")}})
		if err != nil || len(got.GetCatalogs()) != 1 || !proto.Equal(got.GetCatalogs()[0], b2) {
			t.Errorf("after replacing: %v, %v; want %v", got, err, b2)
		}
	})
}

func TestCatalogRejectsBadEntries(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, reopen func() catalogv1.CatalogServiceClient) {
		c := reopen()
		now := timestamppb.Now()
		neg := int64(-1)
		for _, tt := range []struct {
			c    *catalogv1.Catalog
			want string
		}{
			{nil, "catalog is missing"},
			{&catalogv1.Catalog{Key: "abc", ToolsJson: "[]", ListedAt: now}, "64 lowercase hex digits"},
			{&catalogv1.Catalog{Key: strings.ToUpper(key("x")), ToolsJson: "[]", ListedAt: now}, "64 lowercase hex digits"},
			{&catalogv1.Catalog{Key: key("x"), ToolsJson: `{"tools":[]}`, ListedAt: now}, "not a JSON array"},
			{&catalogv1.Catalog{Key: key("x"), ToolsJson: "[]"}, "listed_at is missing"},
			{&catalogv1.Catalog{Key: key("x"), ToolsJson: "[]", ListedAt: now, TtlMs: &neg}, "ttl_ms is -1"},
			{&catalogv1.Catalog{Key: key("x"), ToolsJson: "[]", ListedAt: now, CacheScope: "shared"}, `cache_scope is "shared"`},
		} {
			_, err := c.PutCatalog(t.Context(), &catalogv1.PutCatalogRequest{Catalog: tt.c})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PutCatalog(%v) = %v, want InvalidArgument saying %q", tt.c, err, tt.want)
			}
		}
		if _, err := c.GetCatalogs(t.Context(), &catalogv1.GetCatalogsRequest{Keys: []string{"nothex"}}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("GetCatalogs(bad key) = %v, want InvalidArgument", err)
		}
		got, err := c.GetCatalogs(t.Context(), &catalogv1.GetCatalogsRequest{Keys: []string{key("x")}})
		if err != nil || len(got.GetCatalogs()) != 0 {
			t.Errorf("after rejected writes: %v, %v; want nothing stored", got, err)
		}
	})
}
