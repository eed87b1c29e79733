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
	// Env, when set, measures that environment instead of the usual
	// table (envbench.go).
	Env string
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
	fs.String(&s.Env, "env", "", "instead of the usual table, measure this environment (codeexec env list) beside the host's /usr: imports, starts, a burst, memory")
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
	if s.Env != "" {
		return envBench(ctx, s, stdout)
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
	t := newTable(stdout, spawn.p50)
	t.row("baseline: bare `python3 -c pass` spawn", spawn, fmt.Sprintf("n=%d", s.Spawns))
	if err := t.warmRows(ctx, s); err != nil {
		return err
	}
	restNote, err := t.firstSessionRows(ctx, s)
	if err != nil {
		return err
	}
	if err := t.freshRows(ctx, logger, s); err != nil {
		return err
	}
	if err := t.burstRows(ctx, logger, s); err != nil {
		return err
	}
	memoryLine, err := t.loadRows(ctx, logger, s)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, restNote+memoryLine)
	return t.idleLines(ctx, logger, s)
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
	// The host's /usr, as the baseline spawns the host's python; --env
	// measures an environment (envbench.go).
	cfg.Env = sandboxd.HostEnv
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
	// latency is every exec's; started is those after every session's
	// first, which includes its sandbox's start: the load once all the
	// sessions have started, with no sandbox start beside it.
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
		// firsts is the barrier between the starts and the rest.
		firsts sync.WaitGroup
	)
	firsts.Add(sessions)
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
				firsts.Done()
				return
			}
			ids[i] = s.GetSession().GetId()
			for j := range execs {
				if j == 1 {
					firsts.Done()
					firsts.Wait()
				}
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
