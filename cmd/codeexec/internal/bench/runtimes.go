package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// runtimes prints, per runtime: a new session's first result with and
// without the warm pool, the warm exec round trip over gRPC, and the host
// memory each idle session costs (the sandbox's processes, plus for
// containers the attached CLI and the engine's per-container shim or
// conmon).
func runtimes(ctx context.Context, rb Settings, stdout io.Writer) error {
	logger := slog.New(slog.DiscardHandler)
	fmt.Fprintf(stdout, "codeexec bench --runtimes — %s, %d CPUs; image %s for containers\n\n", hostDescription(), numCPU(), rb.Image)
	fmt.Fprintf(stdout, "| %-8s | %-26s | %-26s | %-22s | %s\n", "runtime", "new session, no pool p50/p99", "new session, pool 4 p50/p99", "warm exec p50/p99", "memory per idle session")
	fmt.Fprintf(stdout, "|%s|%s|%s|%s|%s\n", strings.Repeat("-", 10), strings.Repeat("-", 28), strings.Repeat("-", 28), strings.Repeat("-", 24), strings.Repeat("-", 26))
	for _, rt := range strings.Split(rb.Runtimes, ",") {
		rt = strings.TrimSpace(rt)
		cold, err := runtimeFresh(ctx, logger, rb, rt, 0, 0)
		if err != nil {
			return fmt.Errorf("%s: new session without a pool: %w", rt, err)
		}
		// Between sessions, give the pool time to refill one sandbox.
		pooled, err := runtimeFresh(ctx, logger, rb, rt, 4, max(240*time.Millisecond, cold.p50*3/2))
		if err != nil {
			return fmt.Errorf("%s: new session with a pool: %w", rt, err)
		}
		warm, mem, n, err := runtimeWarmAndIdle(ctx, logger, rb, rt)
		if err != nil {
			return fmt.Errorf("%s: %w", rt, err)
		}
		fmt.Fprintf(stdout, "| %-8s | %-26s | %-26s | %-22s | %.1f MiB PSS (%d sessions)\n", rt,
			ms(cold.p50)+" / "+ms(cold.p99), ms(pooled.p50)+" / "+ms(pooled.p99), ms(warm.p50)+" / "+ms(warm.p99), mem/(1<<20), n)
	}
	fmt.Fprintf(stdout, "\nn=%d new sessions per column, %d warm execs, %d idle sessions\n", rb.Fresh, rb.Warm, rb.Idle)
	return nil
}

// runtimeSandbox runs sandboxd in-process with runtime rt.
func runtimeSandbox(ctx context.Context, logger *slog.Logger, rb Settings, rt string, pool int) (sandboxv1.SandboxServiceClient, func(), error) {
	cfg := sandboxConfig(rb.Python, pool, 0)
	cfg.Runtime, cfg.Image = rt, rb.Image
	return inprocSandbox(ctx, logger, cfg)
}

func runtimeFresh(ctx context.Context, logger *slog.Logger, rb Settings, rt string, pool int, gap time.Duration) (stats, error) {
	c, stop, err := runtimeSandbox(ctx, logger, rb, rt, pool)
	if err != nil {
		return stats{}, err
	}
	defer stop()
	time.Sleep(time.Duration(pool) * gap) // the pool fills first
	first, _, err := timeFresh(ctx, c, rb.Fresh, gap)
	return first, err
}

// runtimeWarmAndIdle times warm execs on one session, then opens rb.Idle
// sessions and measures the memory they hold.
func runtimeWarmAndIdle(ctx context.Context, logger *slog.Logger, rb Settings, rt string) (stats, float64, int, error) {
	c, stop, err := runtimeSandbox(ctx, logger, rb, rt, 0)
	if err != nil {
		return stats{}, 0, 0, err
	}
	defer stop()
	s, err := c.CreateSession(ctx, &sandboxv1.CreateSessionRequest{})
	if err != nil {
		return stats{}, 0, 0, err
	}
	id := s.GetSession().GetId()
	for range 10 {
		if _, err := execOnce(ctx, c, id, "pass"); err != nil {
			return stats{}, 0, 0, err
		}
	}
	var d []time.Duration
	for range rb.Warm {
		t0 := time.Now()
		if _, err := execOnce(ctx, c, id, "pass"); err != nil {
			return stats{}, 0, 0, err
		}
		d = append(d, time.Since(t0))
	}
	for range rb.Idle - 1 {
		s, err := c.CreateSession(ctx, &sandboxv1.CreateSessionRequest{})
		if err != nil {
			return stats{}, 0, 0, err
		}
		if _, err := execOnce(ctx, c, s.GetSession().GetId(), "pass"); err != nil {
			return stats{}, 0, 0, err
		}
	}
	time.Sleep(time.Second)
	var mem float64
	var n int
	if rt == "bwrap" {
		mem, n = sandboxMemory()
	} else {
		mem, n = containerMemory(ctx, rt)
	}
	return summarize(d), mem, n, nil
}

// containerMemory sums the PSS of everything this process's containers
// cost on the host, per container: the processes in the container, the
// engine's per-container parent (containerd-shim for docker, conmon for
// podman) and the attached CLI below this process.
func containerMemory(ctx context.Context, rt string) (float64, int) {
	out, err := exec.CommandContext(ctx, rt, "ps", "-q", "--no-trunc", "--filter", "label=codeexec.owner").Output()
	if err != nil {
		return 0, 0
	}
	ids := strings.Fields(string(out))
	if len(ids) == 0 {
		return 0, 0
	}
	out, err = exec.CommandContext(ctx, rt, append([]string{"inspect", "--format", `{{.State.Pid}} {{index .Config.Labels "codeexec.owner"}}`}, ids...)...).Output()
	if err != nil {
		return 0, 0
	}
	host, _ := os.Hostname()
	mine := fmt.Sprintf("%s/%d/", host, os.Getpid())
	parent := procParents()
	children := map[int][]int{}
	for p, pp := range parent {
		children[pp] = append(children[pp], p)
	}
	counted := map[int]bool{}
	var add func(int)
	add = func(p int) {
		if counted[p] {
			return
		}
		counted[p] = true
		for _, c := range children[p] {
			add(c)
		}
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || !strings.HasPrefix(f[1], mine) {
			continue
		}
		pid, _ := strconv.Atoi(f[0])
		if pid <= 0 {
			continue
		}
		n++
		add(pid)
		counted[parent[pid]] = true // the shim or conmon
	}
	self := os.Getpid()
	for p, pp := range parent {
		if pp == self {
			add(p) // the attached CLIs
		}
	}
	var total int64
	for p := range counted {
		total += pss(p)
	}
	if n == 0 {
		return 0, 0
	}
	return float64(total) / float64(n), n
}
