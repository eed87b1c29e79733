package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/codeexec/codeexec/sandboxd"
)

// table prints Run's rows, each figure beside the spawn baseline.
type table struct {
	w    io.Writer
	base time.Duration
}

// newTable prints the table's header.
func newTable(w io.Writer, base time.Duration) *table {
	fmt.Fprintf(w, "| %-46s | %9s | %9s | %9s | %s\n", "measurement", "p50", "p99", "÷ spawn", "notes")
	fmt.Fprintf(w, "|%s|%s|%s|%s|%s\n", strings.Repeat("-", 48), strings.Repeat("-", 11), strings.Repeat("-", 11), strings.Repeat("-", 11), "------")
	return &table{w: w, base: base}
}

func (t *table) row(name string, st stats, extra string) {
	fmt.Fprintf(t.w, "| %-46s | %9s | %9s | %8.2f× | %s\n", name, ms(st.p50), ms(st.p99), float64(st.p50)/float64(t.base), extra)
}

// warmRows times a warm run_python("pass") through MCP stdio, with and
// without the fork server.
func (t *table) warmRows(ctx context.Context, s Settings) error {
	warm, err := benchWarmStdio(ctx, s.Warm, s.Version)
	if err != nil {
		return fmt.Errorf("warm round trip: %w", err)
	}
	note := fmt.Sprintf("n=%d, taking turns with the row below", s.Warm)
	if warm.ended == 0 {
		note += "; the new server's first session had a sandbox from the fork server"
	} else {
		note += fmt.Sprintf("; the new server's first session had %d sandbox(es) started without the fork server before one from it", warm.ended)
	}
	t.row("warm run_python(\"pass\") via MCP stdio", warm.fork, note)
	t.row("  … with bwrap itself (--fork-server=false)", warm.bwrap, fmt.Sprintf("n=%d", s.Warm))
	return nil
}

// firstSessionRows times the first results of new `codeexec serve`
// processes, and returns the line on their memory at rest, which Run
// prints after the table.
func (t *table) firstSessionRows(ctx context.Context, s Settings) (restNote string, err error) {
	if s.FirstSessions <= 0 {
		return "", nil
	}
	fs, err := benchFirstSession(ctx, s.FirstSessions, 2*time.Second, s.Version)
	if err != nil {
		return "", fmt.Errorf("first session of a new server: %w", err)
	}
	t.row("new `codeexec serve`, 2 s on: first result", fs.first, fmt.Sprintf("n=%d servers; %d of their sessions had a sandbox from the fork server", fs.n, fs.forked))
	t.row("  … then its second result", fs.second, "waits for the first call's checkpoint")
	slices.Sort(fs.rest)
	return fmt.Sprintf("\nmemory of a new `codeexec serve` at rest, 2 s on (pool of 1, no call yet): %.1f–%.1f MiB PSS in its process tree (%d servers)\n",
		float64(fs.rest[0])/(1<<20), float64(fs.rest[len(fs.rest)-1])/(1<<20), len(fs.rest)), nil
}

// freshRows times new sessions to their first result, with and without
// the warm pool, the fork server and launch spares.
func (t *table) freshRows(ctx context.Context, logger *slog.Logger, s Settings) error {
	spares := sandboxd.DefaultConfig().LaunchSpares
	for _, f := range []struct {
		name         string
		pool, spares int
		fork         bool
	}{
		{"new session → first result, no warm pool", 0, spares, true},
		{"  … with bwrap itself (--fork-server=false)", 0, spares, false},
		{"  … and no launch spares either", 0, 0, false},
		{"new session → first result, warm pool of 4", 4, spares, true},
	} {
		gap := freshGap(s.FreshGap, f.pool)
		st, second, err := benchFresh(ctx, logger, s.Python, f.pool, f.spares, f.fork, s.Fresh, gap)
		if err != nil {
			return fmt.Errorf("new session (pool %d, launch spares %d, fork server %t): %w", f.pool, f.spares, f.fork, err)
		}
		t.row(f.name, st, fmt.Sprintf("n=%d, %s apart, launch spares %d, fork server %t", s.Fresh, gap, f.spares, f.fork))
		if f.fork {
			t.row("  … then its second result", second, "waits for the first call's checkpoint")
		}
	}
	return nil
}

// burstRows times a burst of new sessions at once.
func (t *table) burstRows(ctx context.Context, logger *slog.Logger, s Settings) error {
	for _, fork := range []bool{true, false} {
		name := fmt.Sprintf("%d new sessions at once, no pool", s.Burst)
		if !fork {
			name = "  … bwrap (--fork-server=false)"
		}
		b, err := benchBurst(ctx, logger, s.Python, fork, s.Burst)
		if err != nil {
			return fmt.Errorf("burst (fork server %t): %w", fork, err)
		}
		t.row(name, b.st, fmt.Sprintf("slowest %s, p99 ÷ p50 %.1f", ms(b.max), float64(b.st.p99)/float64(b.st.p50)))
	}
	return nil
}

// loadRows runs concurrent sessions and reports their latency, and
// returns the line on memory under that load, which Run prints after the
// table.
func (t *table) loadRows(ctx context.Context, logger *slog.Logger, s Settings) (memoryLine string, err error) {
	// Checkpoints off first, then on (as serve runs), in the same run.
	off, err := benchLoad(ctx, logger, s.Python, s.Sessions, s.PerSession, false)
	if err != nil {
		return "", fmt.Errorf("load without checkpoints: %w", err)
	}
	load, err := benchLoad(ctx, logger, s.Python, s.Sessions, s.PerSession, true)
	if err != nil {
		return "", fmt.Errorf("load: %w", err)
	}
	t.row(fmt.Sprintf("%d sessions × %d execs, concurrent: latency", s.Sessions, s.PerSession), load.latency,
		fmt.Sprintf("%.0f execs/s (%.2f× the row below), %d errors, %d lost outputs; once all started: p50 %s, p99 %s (%.1f× p50)",
			load.throughput, load.throughput/off.throughput, load.errors, load.lost,
			ms(load.started.p50), ms(load.started.p99), float64(load.started.p99)/float64(load.started.p50)))
	t.row("  … checkpoints off (a bench-only switch)", off.latency,
		fmt.Sprintf("%.0f execs/s, %d errors, %d lost outputs; once all started: p50 %s, p99 %s (%.1f× p50)",
			off.throughput, off.errors, off.lost, ms(off.started.p50), ms(off.started.p99), float64(off.started.p99)/float64(off.started.p50)))
	return fmt.Sprintf("\nmemory under load: %.1f MiB PSS per session (%d sandboxes), server RSS %.1f MiB (peak %.1f MiB)\n",
		load.pssPerSandbox/(1<<20), load.sandboxes, float64(load.serverRSS)/(1<<20), float64(load.serverPeak)/(1<<20)), nil
}

// idleLines reports the memory of idle sessions, with and without the
// fork server.
func (t *table) idleLines(ctx context.Context, logger *slog.Logger, s Settings) error {
	for _, fork := range []bool{true, false} {
		m, err := benchIdle(ctx, logger, s.Python, fork, s.IdleSessions)
		if err != nil {
			return fmt.Errorf("idle memory (fork server %t): %w", fork, err)
		}
		further := "n/a (give --idle-sessions 2 or more)"
		if m.further > 0 {
			further = fmt.Sprintf("%.2f MiB", m.further/(1<<20))
		}
		counted := "spares and launchers counted in"
		if fork {
			counted = "the fork server and its spares counted in"
		}
		fmt.Fprintf(t.w, "memory per idle session, fork server %-5t: %.2f MiB PSS (%d sandboxes; %s); each of the second half added %s\n",
			fork, m.perSession/(1<<20), m.sandboxes, counted, further)
	}
	return nil
}
