// Package bench measures codeexec's latency, throughput and memory for
// `codeexec bench`: against a bare Python spawn, through MCP stdio and
// through sandboxd in-process.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/flagenv"
)

// Settings size the runs.
type Settings struct {
	Python              string
	Spawns, Warm, Fresh int
	// FreshGap is the shortest pause before each new session that Fresh
	// times (a pool's rows wait longer, for the pool to refill).
	FreshGap             time.Duration
	Sessions, PerSession int
	// Burst is how many sessions start at once, without a warm pool;
	// IdleSessions how many idle ones the memory figures count.
	Burst, IdleSessions int
	// FirstSessions is how many new `codeexec serve` processes have their
	// first session timed.
	FirstSessions int
	// Runtimes, when set, compares these sandbox runtimes side by side
	// instead of the usual table (Image for the container runtimes, Idle
	// sessions for the memory figure).
	Runtimes string
	Image    string
	Idle     int
	// Version names the benchmark's MCP client.
	Version string
}

// check refuses counts that would leave a figure without a measurement:
// every row needs at least one sample, and the spawn is what every row is
// divided by.
func (s Settings) check() error {
	counts := []struct {
		flag  string
		n     int
		least int
	}{
		{"--spawns", s.Spawns, 1}, {"--warm", s.Warm, 1}, {"--fresh", s.Fresh, 1},
		{"--sessions", s.Sessions, 1}, {"--execs", s.PerSession, 1}, {"--burst", s.Burst, 1},
		{"--idle-sessions", s.IdleSessions, 1}, {"--idle", s.Idle, 1}, {"--first-sessions", s.FirstSessions, 0},
	}
	for _, c := range counts {
		if c.n < c.least {
			what := "a whole number of at least 1"
			if c.least == 0 {
				what = "0 (to skip its rows) or more"
			}
			return fmt.Errorf("%s %d: give %s", c.flag, c.n, what)
		}
	}
	return nil
}

// Bind binds the benchmark's flags.
func Bind(fs *flagenv.Set, s *Settings) {
	fs.String(&s.Python, "python", "/usr/bin/python3", "interpreter for the baseline and the sandboxes")
	fs.Int(&s.Spawns, "spawns", 40, "bare python3 spawns for the baseline")
	fs.Int(&s.Warm, "warm", 300, "warm run_python round trips through MCP stdio")
	fs.Int(&s.Fresh, "fresh", 25, "new sessions timed, with and without the warm pool")
	fs.Duration(&s.FreshGap, "fresh-gap", 100*time.Millisecond, "shortest pause before each of those new sessions (the pool's rows wait longer, for it to refill), at least 10ms; --runtimes ignores it")
	fs.Int(&s.Sessions, "sessions", 50, "concurrent sessions in the load test")
	fs.Int(&s.PerSession, "execs", 20, "execs per session in the load test")
	fs.Int(&s.Burst, "burst", 50, "sessions started at once, without a warm pool")
	fs.Int(&s.FirstSessions, "first-sessions", 5, "new `codeexec serve` processes whose first session is timed; 0 skips the rows")
	fs.Int(&s.IdleSessions, "idle-sessions", 50, "idle sessions for the memory figures of the usual table (--idle is for --runtimes)")
	fs.String(&s.Runtimes, "runtimes", "", "instead of the usual table, compare these sandbox runtimes side by side, e.g. bwrap,podman,docker")
	fs.String(&s.Image, "image", "localhost/codeexec-sandbox:latest", "image for the container runtimes (with --runtimes; build it with deploy/build-images.sh)")
	fs.Int(&s.Idle, "idle", 8, "idle sessions for the memory figure (with --runtimes)")
}

// Run measures the figures in docs/PERFORMANCE.md and prints a table.
// Every figure sits beside the bare `python3 -c pass` spawn, measured in
// the same run, because shared machines are noisy. The warm round trip
// drives this very binary as `codeexec serve`.
func Run(ctx context.Context, s Settings, stdout io.Writer) error {
	if err := s.check(); err != nil {
		return err
	}
	if s.Runtimes != "" {
		return runtimes(ctx, s, stdout)
	}
	if s.FreshGap < 10*time.Millisecond {
		return fmt.Errorf("--fresh-gap %s is too short: give at least 10ms, such as 100ms or 1s (under about 100ms a new session may find the spares not yet refilled)", s.FreshGap)
	}
	logger := slog.New(slog.DiscardHandler)
	fmt.Fprintf(stdout, "codeexec bench — %s, %d CPUs\n\n", hostDescription(), numCPU())

	spawn, err := benchSpawn(s.Python, s.Spawns)
	if err != nil {
		return err
	}
	base := spawn.p50
	row := func(name string, st stats, extra string) {
		fmt.Fprintf(stdout, "| %-46s | %9s | %9s | %8.2f× | %s\n", name, ms(st.p50), ms(st.p99), float64(st.p50)/float64(base), extra)
	}
	fmt.Fprintf(stdout, "| %-46s | %9s | %9s | %9s | %s\n", "measurement", "p50", "p99", "÷ spawn", "notes")
	fmt.Fprintf(stdout, "|%s|%s|%s|%s|%s\n", strings.Repeat("-", 48), strings.Repeat("-", 11), strings.Repeat("-", 11), strings.Repeat("-", 11), "------")
	row("baseline: bare `python3 -c pass` spawn", spawn, fmt.Sprintf("n=%d", s.Spawns))

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
	row("warm run_python(\"pass\") via MCP stdio", warm.fork, note)
	row("  … with bwrap itself (--fork-server=false)", warm.bwrap, fmt.Sprintf("n=%d", s.Warm))

	restNote := ""
	if s.FirstSessions > 0 {
		fs, err := benchFirstSession(ctx, s.FirstSessions, 2*time.Second, s.Version)
		if err != nil {
			return fmt.Errorf("first session of a new server: %w", err)
		}
		row("new `codeexec serve`, 2 s on: first result", fs.first, fmt.Sprintf("n=%d servers; %d of their sessions had a sandbox from the fork server", fs.n, fs.forked))
		row("  … then its second result", fs.second, "waits for the first call's checkpoint")
		slices.Sort(fs.rest)
		restNote = fmt.Sprintf("\nmemory of a new `codeexec serve` at rest, 2 s on (pool of 1, no call yet): %.1f–%.1f MiB PSS in its process tree (%d servers)\n",
			float64(fs.rest[0])/(1<<20), float64(fs.rest[len(fs.rest)-1])/(1<<20), len(fs.rest))
	}

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
		row(f.name, st, fmt.Sprintf("n=%d, %s apart, launch spares %d, fork server %t", s.Fresh, gap, f.spares, f.fork))
		if f.fork {
			row("  … then its second result", second, "waits for the first call's checkpoint")
		}
	}
	for _, fork := range []bool{true, false} {
		name := fmt.Sprintf("%d new sessions at once, no pool", s.Burst)
		if !fork {
			name = "  … bwrap (--fork-server=false)"
		}
		b, err := benchBurst(ctx, logger, s.Python, fork, s.Burst)
		if err != nil {
			return fmt.Errorf("burst (fork server %t): %w", fork, err)
		}
		row(name, b.st, fmt.Sprintf("slowest %s, p99 ÷ p50 %.1f", ms(b.max), float64(b.st.p99)/float64(b.st.p50)))
	}

	// Checkpoints off first, then on (as serve runs), in the same run.
	off, err := benchLoad(ctx, logger, s.Python, s.Sessions, s.PerSession, false)
	if err != nil {
		return fmt.Errorf("load without checkpoints: %w", err)
	}
	load, err := benchLoad(ctx, logger, s.Python, s.Sessions, s.PerSession, true)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	row(fmt.Sprintf("%d sessions × %d execs, concurrent: latency", s.Sessions, s.PerSession), load.latency,
		fmt.Sprintf("%.0f execs/s (%.2f× the row below), %d errors, %d lost outputs; once started: p50 %s, p99 %s (%.1f× p50)",
			load.throughput, load.throughput/off.throughput, load.errors, load.lost,
			ms(load.started.p50), ms(load.started.p99), float64(load.started.p99)/float64(load.started.p50)))
	row("  … checkpoints off (a bench-only switch)", off.latency,
		fmt.Sprintf("%.0f execs/s, %d errors, %d lost outputs; once started: p50 %s, p99 %s (%.1f× p50)",
			off.throughput, off.errors, off.lost, ms(off.started.p50), ms(off.started.p99), float64(off.started.p99)/float64(off.started.p50)))
	fmt.Fprint(stdout, restNote)
	fmt.Fprintf(stdout, "\nmemory under load: %.1f MiB PSS per session (%d sandboxes), server RSS %.1f MiB (peak %.1f MiB)\n",
		load.pssPerSandbox/(1<<20), load.sandboxes, float64(load.serverRSS)/(1<<20), float64(load.serverPeak)/(1<<20))
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
		fmt.Fprintf(stdout, "memory per idle session, fork server %-5t: %.2f MiB PSS (%d sandboxes; %s); each of the second half added %s\n",
			fork, m.perSession/(1<<20), m.sandboxes, counted, further)
	}
	return nil
}

type stats struct{ p50, p99 time.Duration }

func summarize(d []time.Duration) stats {
	if len(d) == 0 {
		return stats{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return stats{p50: at(0.50), p99: at(0.99)}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func benchSpawn(python string, n int) (stats, error) {
	var d []time.Duration
	for range n {
		start := time.Now()
		if err := exec.Command(python, "-c", "pass").Run(); err != nil {
			return stats{}, fmt.Errorf("spawn %s: %w", python, err)
		}
		d = append(d, time.Since(start))
	}
	return summarize(d), nil
}

// sandboxConfig is the default config with the bench's choices.
func sandboxConfig(python string, pool, maxSessions int) sandboxd.Config {
	cfg := sandboxd.DefaultConfig()
	cfg.Python, cfg.PoolSize, cfg.MaxSessions = python, pool, maxSessions
	return cfg
}

// execOnce runs code and returns its stdout.
func execOnce(ctx context.Context, c sandboxv1.SandboxServiceClient, id, code string) (string, error) {
	stream, err := c.Execute(ctx, &sandboxv1.ExecuteRequest{SessionId: id, Code: code, Timeout: durationpb.New(60 * time.Second)})
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for {
		ev, err := stream.Recv()
		if err != nil {
			return "", err
		}
		if o := ev.GetOutput(); o != nil && o.GetStream() == sandboxv1.Stream_STREAM_STDOUT {
			out.WriteString(o.GetText())
		}
		if r := ev.GetResult(); r != nil {
			if r.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK {
				return out.String(), fmt.Errorf("exec %s: %s", r.GetStatus(), r.GetError())
			}
			return out.String(), nil
		}
	}
}

func benchFresh(ctx context.Context, logger *slog.Logger, python string, pool, spares int, forkServer bool, n int, gap time.Duration) (first, second stats, err error) {
	cfg := sandboxConfig(python, pool, 0)
	cfg.LaunchSpares, cfg.ForkServer = spares, forkServer
	c, stop, err := settledSandbox(ctx, logger, cfg)
	if err != nil {
		return stats{}, stats{}, err
	}
	defer stop()
	// Sessions arrive apart, as real ones do: the pool and the launch
	// spares refill in between, and no session gains from kernel state the
	// previous one left warm (docs/PERFORMANCE.md, on cgroup moves).
	return timeFresh(ctx, c, n, gap)
}

// freshGap is the pause before each new session of a fresh row: the
// given least, or longer for a pool of pool sandboxes to refill.
func freshGap(least time.Duration, pool int) time.Duration {
	return max(least, time.Duration(pool)*60*time.Millisecond)
}

// timeFresh times n new sessions to their first result, waiting gap
// before each, and then each one's second result.
func timeFresh(ctx context.Context, c sandboxv1.SandboxServiceClient, n int, gap time.Duration) (first, second stats, err error) {
	var d, d2 []time.Duration
	for range n {
		time.Sleep(gap)
		start := time.Now()
		s, err := c.CreateSession(ctx, &sandboxv1.CreateSessionRequest{})
		if err != nil {
			return stats{}, stats{}, err
		}
		id := s.GetSession().GetId()
		if _, err := execOnce(ctx, c, id, "pass"); err != nil {
			return stats{}, stats{}, err
		}
		d = append(d, time.Since(start))
		start = time.Now()
		if _, err := execOnce(ctx, c, id, "pass"); err != nil {
			return stats{}, stats{}, err
		}
		d2 = append(d2, time.Since(start))
		if _, err := c.DestroySession(ctx, &sandboxv1.DestroySessionRequest{SessionId: id}); err != nil {
			return stats{}, stats{}, err
		}
	}
	return summarize(d), summarize(d2), nil
}

type loadResult struct {
	// latency is every exec's; started leaves out each session's first,
	// which includes its sandbox's start.
	latency, started        stats
	throughput              float64
	errors, lost, sandboxes int
	pssPerSandbox           float64
	serverRSS, serverPeak   int64
}

func benchLoad(ctx context.Context, logger *slog.Logger, python string, sessions, execs int, durable bool) (loadResult, error) {
	c, stop, err := inprocSandboxDurable(ctx, logger, sandboxConfig(python, 4, sessions+8), durable)
	if err != nil {
		return loadResult{}, err
	}
	defer stop()
	var (
		mu       sync.Mutex
		lat, run []time.Duration
		res      loadResult
		wg       sync.WaitGroup
		ids      = make([]string, sessions)
	)
	start := time.Now()
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.CreateSession(ctx, &sandboxv1.CreateSessionRequest{})
			if err != nil {
				mu.Lock()
				res.errors++
				mu.Unlock()
				return
			}
			ids[i] = s.GetSession().GetId()
			for j := range execs {
				token := fmt.Sprintf("s%d-e%d", i, j)
				t0 := time.Now()
				out, err := execOnce(ctx, c, ids[i], fmt.Sprintf("print(%q)", token))
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				if j > 0 {
					run = append(run, d)
				}
				switch {
				case err != nil:
					res.errors++
				case out != token+"\n":
					res.lost++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	res.latency, res.started = summarize(lat), summarize(run)
	res.throughput = float64(len(lat)) / elapsed.Seconds()
	time.Sleep(500 * time.Millisecond) // let the pool refill so the count is stable
	res.pssPerSandbox, res.sandboxes = sandboxMemory()
	res.serverRSS, res.serverPeak = selfMemory()
	return res, nil
}
