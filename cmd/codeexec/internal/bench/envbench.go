package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/sandboxd"
)

// importPandas is the first exec of each new session in the import rows:
// it prints how long `import pandas` took inside the interpreter.
const importPandas = "import time\nt = time.perf_counter()\nimport pandas\nprint(time.perf_counter() - t)"

// envBench is `codeexec bench --env NAME`: the issue 35 figures of an
// environment, each beside its baseline from the same run (a bare spawn
// of the environment's own interpreter, a cold import in it, the CPU
// bound of a burst, the host's /usr).
func envBench(ctx context.Context, s Settings, stdout io.Writer) error {
	env, err := sandboxd.OpenEnvStore(os.Getenv("CODEEXEC_ENV_DIR")).Get(s.Env)
	if err != nil {
		return err
	}
	logger := slog.New(slog.DiscardHandler)
	fmt.Fprintf(stdout, "codeexec bench --env %s — %s, %d CPUs; Python %s, %d MiB on disk, built in %.0f s\n\n",
		env.Label(), hostDescription(), numCPU(), env.Python, env.Bytes>>20, env.BuildSeconds)
	spawn, err := chrootSpawn(env.Root, s.Spawns)
	if err != nil {
		return err
	}
	row := func(name string, v, base time.Duration, note string) {
		fmt.Fprintf(stdout, "| %-52s | %10s | %10s | %7.2f× | %s\n", name, ms(v), ms(base), float64(v)/float64(base), note)
	}
	fmt.Fprintf(stdout, "| %-52s | %10s | %10s | %8s | %s\n", "measurement (p50)", "value", "baseline", "ratio", "baseline, notes")
	fmt.Fprintf(stdout, "|%s|%s|%s|%s|%s\n", strings.Repeat("-", 54), strings.Repeat("-", 12), strings.Repeat("-", 12), strings.Repeat("-", 10), "------")
	row("bare spawn of the environment's python3 -c pass", spawn.p50, spawn.p50, fmt.Sprintf("n=%d, exec'd in the tree (chroot)", s.Spawns))

	cold, err := coldImport(env.Root, 5)
	if err != nil {
		return err
	}
	cfg := envConfig(s, 0, s.Fresh+8, true)
	c, stop, err := forkedSandbox(ctx, logger, cfg)
	if err != nil {
		return err
	}
	imports, firsts, err := importInNewSessions(ctx, c, s.Fresh, s.FreshGap)
	stop()
	if err != nil {
		return err
	}
	row("`import pandas` in a new session (fork server)", imports.p50, cold.p50, "baseline: the same import in a cold interpreter of the environment (n=5)")
	row("new session → first result, no pool, fork server", firsts.p50, spawn.p50, fmt.Sprintf("n=%d, %s apart; baseline: the bare spawn", s.Fresh, s.FreshGap))
	if err := envStarts(ctx, logger, s, row, spawn.p50); err != nil {
		return err
	}
	return envMemory(ctx, logger, s, stdout)
}

// envConfig is the bench's sandboxd in the environment (or on the host's
// /usr), without a pool unless asked.
func envConfig(s Settings, pool, maxSessions int, fork bool) sandboxd.Config {
	cfg := sandboxConfig("/usr/bin/python3", pool, maxSessions)
	cfg.Env, cfg.EnvDir, cfg.ForkServer = s.Env, os.Getenv("CODEEXEC_ENV_DIR"), fork
	return cfg
}

// envStarts measures the bwrap start, a burst against its CPU bound and
// the warm round trip beside the host's.
func envStarts(ctx context.Context, logger *slog.Logger, s Settings, row func(string, time.Duration, time.Duration, string), spawn time.Duration) error {
	c, stop, err := settledSandbox(ctx, logger, envConfig(s, 0, s.Fresh+8, false))
	if err != nil {
		return err
	}
	bw, _, err := timeFresh(ctx, c, s.Fresh, s.FreshGap)
	stop()
	if err != nil {
		return err
	}
	row("  … bwrap itself (--fork-server=false)", bw.p50, spawn, "baseline: the bare spawn")

	c, stop, err = forkedSandbox(ctx, logger, envConfig(s, 0, s.Burst+8, true))
	if err != nil {
		return err
	}
	perStart, err := cpuPerStart(ctx, c, s.Fresh)
	if err == nil {
		var b burstResult
		b, err = runBurst(ctx, c, s.Burst)
		bound := time.Duration(float64(s.Burst) * float64(perStart) / float64(numCPU()))
		row(fmt.Sprintf("%d new sessions at once (fork server): the last", s.Burst), b.max, bound,
			fmt.Sprintf("baseline: the CPU bound, %d × %s CPU a start ÷ %d CPUs; p50 %s", s.Burst, ms(perStart), numCPU(), ms(b.st.p50)))
		row("CPU one start costs (sandboxd, fork server, sandbox)", perStart, spawn, "baseline: the bare spawn's wall time")
	}
	stop()
	if err != nil {
		return err
	}
	hostCfg := envConfig(s, 0, s.Fresh+8, true)
	hostCfg.Env = sandboxd.HostEnv
	if c, stop, err = forkedSandbox(ctx, logger, hostCfg); err != nil {
		return err
	}
	hostStart, err := cpuPerStart(ctx, c, s.Fresh)
	stop()
	if err != nil {
		return err
	}
	row("  … the same on the host's /usr (nothing preloaded)", hostStart, spawn, "baseline: the bare spawn's wall time")
	warmEnv, warmHost, err := warmTurns(ctx, logger, s)
	if err != nil {
		return err
	}
	row("warm run_python(\"pass\") in the environment", warmEnv.p50, warmHost.p50, fmt.Sprintf("n=%d each, taking turns; baseline: the host's /usr", s.Warm))
	return nil
}

// warmTurns times warm execs of "pass" on a session in the environment
// and on one on the host's /usr, taking turns.
func warmTurns(ctx context.Context, logger *slog.Logger, s Settings) (env, host stats, err error) {
	hostCfg := envConfig(s, 1, 4, true)
	hostCfg.Env = sandboxd.HostEnv
	var sides [2]struct {
		c  sandboxv1.SandboxServiceClient
		id string
		d  []time.Duration
	}
	for i, cfg := range []sandboxd.Config{envConfig(s, 1, 4, true), hostCfg} {
		c, stop, err := forkedSandbox(ctx, logger, cfg)
		if err != nil {
			return stats{}, stats{}, err
		}
		defer stop()
		sess, err := c.CreateSession(ctx, &sandboxv1.CreateSessionRequest{})
		if err != nil {
			return stats{}, stats{}, err
		}
		sides[i].c, sides[i].id = c, sess.GetSession().GetId()
		if _, err := execOnce(ctx, c, sides[i].id, "pass"); err != nil {
			return stats{}, stats{}, err
		}
	}
	for range s.Warm {
		for i := range sides {
			t0 := time.Now()
			if _, err := execOnce(ctx, sides[i].c, sides[i].id, "pass"); err != nil {
				return stats{}, stats{}, err
			}
			sides[i].d = append(sides[i].d, time.Since(t0))
		}
	}
	return summarize(sides[0].d), summarize(sides[1].d), nil
}

// envMemory prints the host memory per idle session forked in the
// environment, with its data stack preloaded, beside the host's /usr.
func envMemory(ctx context.Context, logger *slog.Logger, s Settings, stdout io.Writer) error {
	for _, host := range []bool{false, true} {
		cfg := envConfig(s, 0, s.IdleSessions+8, true)
		what := "the environment (data stack preloaded)"
		if host {
			cfg.Env, what = sandboxd.HostEnv, "the host's /usr (agent only)"
		}
		c, stop, err := forkedSandbox(ctx, logger, cfg)
		if err != nil {
			return err
		}
		m, err := runIdle(ctx, c, s.IdleSessions)
		kinds := memoryByKind()
		stop()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nmemory per idle forked session in %s: %.2f MiB PSS (%d sandboxes, the fork server and its spares counted in); each of the second half added %.2f MiB\n",
			what, m.perSession/(1<<20), m.sandboxes, m.further/(1<<20))
		for _, name := range slices.Sorted(maps.Keys(kinds)) {
			k := kinds[name]
			fmt.Fprintf(stdout, "  %-16s ×%-3d PSS %6.2f MiB each, private dirty %6.2f MiB each\n",
				name, k.n, float64(k.pss)/float64(k.n)/(1<<20), float64(k.privateDirty)/float64(k.n)/(1<<20))
		}
	}
	fmt.Fprintln(stdout)
	return nil
}

// forkedSandbox is settledSandbox once its fork server is up: a server
// that preloads the data stack takes seconds to start, and sandboxes
// started meanwhile come from bwrap, which would mix two ways into one
// row.
func forkedSandbox(ctx context.Context, logger *slog.Logger, cfg sandboxd.Config) (sandboxv1.SandboxServiceClient, func(), error) {
	c, stop, err := settledSandbox(ctx, logger, cfg)
	if err != nil {
		return nil, nil, err
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		sess, err := c.CreateSession(ctx, &sandboxv1.CreateSessionRequest{})
		if err != nil {
			stop()
			return nil, nil, err
		}
		id := sess.GetSession().GetId()
		out, err := execOnce(ctx, c, id, "print(open('/proc/1/comm').read().strip())")
		_, _ = c.DestroySession(ctx, &sandboxv1.DestroySessionRequest{SessionId: id})
		if err != nil {
			stop()
			return nil, nil, err
		}
		if strings.TrimSpace(out) == "codeexec-init" {
			time.Sleep(500 * time.Millisecond) // its spares are made again
			return c, stop, nil
		}
	}
	stop()
	return nil, nil, errors.New("the fork server did not come up within 2 minutes")
}

// chrootSpawn times bare spawns of the environment's interpreter, exec'd
// directly in its tree.
func chrootSpawn(root string, n int) (stats, error) {
	var d []time.Duration
	for range n {
		cmd := exec.Command("/usr/bin/python3", "-c", "pass")
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		cmd.Dir, cmd.Env = "/", []string{}
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			return stats{}, fmt.Errorf("spawn python3 in %s: %w: %s", root, err, out)
		}
		d = append(d, time.Since(start))
	}
	return summarize(d), nil
}

// coldImport times `import pandas` in n new interpreters of the tree.
func coldImport(root string, n int) (stats, error) {
	var d []time.Duration
	for range n {
		cmd := exec.Command("/usr/bin/python3", "-I", "-c", importPandas)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		cmd.Dir, cmd.Env = "/", []string{"MPLBACKEND=Agg"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return stats{}, fmt.Errorf("import pandas in %s: %w: %s", root, err, out)
		}
		sec, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			return stats{}, fmt.Errorf("import pandas in %s printed %q", root, out)
		}
		d = append(d, time.Duration(sec*float64(time.Second)))
	}
	return summarize(d), nil
}

// importInNewSessions times `import pandas` as the first exec of n new
// sessions (inside the sandbox), and each session to that first result.
func importInNewSessions(ctx context.Context, c sandboxv1.SandboxServiceClient, n int, gap time.Duration) (imports, firsts stats, err error) {
	var di, df []time.Duration
	for range n {
		time.Sleep(gap)
		t0 := time.Now()
		sess, err := c.CreateSession(ctx, &sandboxv1.CreateSessionRequest{})
		if err != nil {
			return stats{}, stats{}, err
		}
		id := sess.GetSession().GetId()
		out, err := execOnce(ctx, c, id, importPandas)
		if err != nil {
			return stats{}, stats{}, err
		}
		df = append(df, time.Since(t0))
		sec, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
		if err != nil {
			return stats{}, stats{}, fmt.Errorf("the session printed %q", out)
		}
		di = append(di, time.Duration(sec*float64(time.Second)))
		_, _ = c.DestroySession(ctx, &sandboxv1.DestroySessionRequest{SessionId: id})
	}
	return summarize(di), summarize(df), nil
}

// cpuPerStart starts and destroys n sessions one after the other and
// returns the CPU time each cost this process, its reaped children (the
// sandboxes) and its live children (the fork server).
func cpuPerStart(ctx context.Context, c sandboxv1.SandboxServiceClient, n int) (time.Duration, error) {
	before := cpuTree()
	for range n {
		sess, err := c.CreateSession(ctx, &sandboxv1.CreateSessionRequest{})
		if err != nil {
			return 0, err
		}
		id := sess.GetSession().GetId()
		if _, err := execOnce(ctx, c, id, "pass"); err != nil {
			return 0, err
		}
		if _, err := c.DestroySession(ctx, &sandboxv1.DestroySessionRequest{SessionId: id}); err != nil {
			return 0, err
		}
	}
	time.Sleep(200 * time.Millisecond) // the last sandboxes are reaped
	return (cpuTree() - before) / time.Duration(n), nil
}

// cpuTree is the CPU time of this process, of its reaped children and of
// its live children, as far as /proc shows them (clock ticks).
func cpuTree() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	total := tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
	me := strconv.Itoa(os.Getpid())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+2:]))
		if len(f) < 13 || f[1] != me {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ is 100
	}
	return total
}
