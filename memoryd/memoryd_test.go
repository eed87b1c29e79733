package memoryd_test

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/grpctest"
	"github.com/codeexec/codeexec/services/pgtest"
)

// env is one memoryd on a real bbolt file, reached through the generated
// clients over bufconn.
type env struct {
	conn   *grpc.ClientConn
	svc    *memoryd.Service
	mem    memoryv1.MemoryServiceClient
	tools  memoryv1.ToolServiceClient
	path   string
	closed bool
}

// eachStore runs a test once per store, so that the same table of tests
// holds for a bbolt file and for a PostgreSQL database (on the test
// binary's server; see TestMain in kill_test.go).
func eachStore(t *testing.T, test func(t *testing.T, cfg memoryd.Config)) {
	t.Helper()
	for _, st := range []struct {
		name string
		cfg  func(t *testing.T) memoryd.Config
	}{
		{"bolt", func(*testing.T) memoryd.Config { return memoryd.Config{} }},
		{"postgres", func(t *testing.T) memoryd.Config { return memoryd.Config{Store: pgtest.NewDatabase(t)} }},
	} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			test(t, st.cfg(t))
		})
	}
}

// start runs memoryd for one test. cfg.Path defaults to a file in
// t.TempDir().
func start(tb testing.TB, cfg memoryd.Config) *env {
	tb.Helper()
	if cfg.Path == "" && cfg.Store == "" {
		cfg.Path = filepath.Join(tb.TempDir(), "memory.db")
	}
	svc, err := memoryd.New(cfg, nil)
	if err != nil {
		tb.Fatalf("memoryd.New: %v", err)
	}
	e := &env{svc: svc, path: cfg.Path}
	// Registered before the server's own cleanup, so it runs after the
	// server has stopped.
	tb.Cleanup(func() {
		if !e.closed {
			if err := svc.Close(); err != nil {
				tb.Errorf("Close: %v", err)
			}
		}
	})
	e.conn = grpctest.Start(tb, svc.Register)
	e.mem, e.tools = memoryv1.NewMemoryServiceClient(e.conn), memoryv1.NewToolServiceClient(e.conn)
	return e
}

// save is SaveMemory that fails the test on error.
func (e *env) save(tb testing.TB, tenant, key, value, meta string) *memoryv1.MemoryRecord {
	tb.Helper()
	resp, err := e.mem.SaveMemory(tb.Context(), &memoryv1.SaveMemoryRequest{Tenant: tenant, Key: key, ValueJson: value, MetadataJson: meta})
	if err != nil {
		tb.Fatalf("SaveMemory(%q, %q): %v", key, value, err)
	}
	return resp.GetRecord()
}

// get is GetMemory that fails the test on error.
func (e *env) get(tb testing.TB, tenant, key string) *memoryv1.MemoryRecord {
	tb.Helper()
	resp, err := e.mem.GetMemory(tb.Context(), &memoryv1.GetMemoryRequest{Tenant: tenant, Key: key})
	if err != nil {
		tb.Fatalf("GetMemory(%q): %v", key, err)
	}
	return resp.GetRecord()
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  memoryd.Config
		want string // error substring; "" for valid
	}{
		{"defaults", memoryd.Config{Path: "m.db"}, ""},
		{"no path", memoryd.Config{}, "database path is empty"},
		{"negative cap", memoryd.Config{Path: "m.db", MaxValueBytes: -1}, "max value bytes is -1"},
		{"cap too large", memoryd.Config{Path: "m.db", MaxValueBytes: memoryd.MaxMaxValueBytes + 1}, "the most allowed is"},
		{"negative owner wait", memoryd.Config{Path: "m.db", OwnerWait: -1}, "owner wait is -1ns"},
		{"postgres", memoryd.Config{Store: "postgres://db.example/codeexec?target_session_attrs=read-write"}, ""},
		{"postgresql scheme", memoryd.Config{Store: "postgresql://a:5432,b:5432/codeexec"}, ""},
		{"not a postgres URL", memoryd.Config{Store: "/var/lib/codeexec/m.db"}, "the store must be a PostgreSQL URL"},
		{"key=value form", memoryd.Config{Store: "host=db dbname=codeexec"}, "postgres://"},
		{"negative store wait", memoryd.Config{Store: "postgres://db/x", StoreWait: -1}, "store wait is -1ns"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			err := cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if cfg.MaxValueBytes != memoryd.DefaultMaxValueBytes || cfg.OwnerWait != memoryd.DefaultOwnerWait {
					t.Errorf("defaults not applied: %+v", cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
