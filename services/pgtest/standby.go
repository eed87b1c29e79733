package pgtest

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartStandby makes a streaming standby of s with pg_basebackup and
// starts it. With sync set, s then waits for the standby to have flushed
// every commit before it acknowledges it (synchronous_standby_names), so
// that a failover loses no acknowledged commit.
func (s *Server) StartStandby(tb testing.TB, sync bool) *Server {
	tb.Helper()
	dir, err := privateDir()
	if err != nil {
		tb.Fatal(err)
	}
	st := &Server{Dir: dir, bin: s.bin}
	tb.Cleanup(st.remove)
	if err := st.mkdirOwned(st.DataDir()); err != nil {
		tb.Fatal(err)
	}
	out, err := st.command("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres",
		"-D", st.DataDir(), "-R", "-X", "stream", "-c", "fast", "--no-sync").CombinedOutput()
	if err != nil {
		tb.Fatalf("pgtest: pg_basebackup: %v\n%s", err, out)
	}
	// A promotion waits for the WAL receiver's next retry, every
	// wal_retrieve_retry_interval (5 s by default): a primary killed just
	// before makes it that slow. Orchestrators tune it down likewise.
	if err := appendFile(filepath.Join(st.DataDir(), "postgresql.conf"), "cluster_name = 'standby'\nwal_retrieve_retry_interval = '250ms'\n"); err != nil {
		tb.Fatal(err)
	}
	if err := st.Restart(); err != nil {
		tb.Fatal(err)
	}
	if sync {
		if err := s.Exec(tb.Context(), "postgres", "ALTER SYSTEM SET synchronous_standby_names = 'standby'", "SELECT pg_reload_conf()"); err != nil {
			tb.Fatal(err)
		}
	}
	// Wait until the standby streams (and, with sync, is synchronous).
	want := "async"
	if sync {
		want = "sync"
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var state string
		conn, err := pgx.Connect(tb.Context(), s.URL("postgres"))
		if err == nil {
			err = conn.QueryRow(tb.Context(), "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'").Scan(&state)
			_ = conn.Close(tb.Context())
		}
		if err == nil && state == want {
			return st
		}
		if time.Now().After(deadline) {
			tb.Fatalf("pgtest: the standby is not streaming as %s after 30s (%q, %v)\nstandby log:\n%s", want, state, err, st.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Promote makes a standby the primary and waits until it accepts writes.
func (s *Server) Promote(ctx context.Context) error {
	if err := s.Exec(ctx, "postgres", "SELECT pg_promote(true, 60)"); err != nil {
		return fmt.Errorf("pgtest: promote: %w", err)
	}
	return nil
}
