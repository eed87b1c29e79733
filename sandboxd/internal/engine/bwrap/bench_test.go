package bwrap

import (
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
)

// BenchmarkStartToFirstByte measures how long a sandboxed `python3 -I`
// takes to write its first byte after Start (with cgroups and limits, as
// in production), with and without spare launchers and from the fork
// server (which runs the script in its forked interpreter), with and
// without its spares, against the same interpreter run bare. Starts are 20 ms apart, outside the timer, as
// sessions arrive in practice: back-to-back starts would hide the wait a
// cgroup v1 move makes after a quiet moment (launcher.go). Teardown is not
// timed either. Run:
//
//	go test -run '^$' -bench StartToFirstByte ./sandboxd/internal/engine/bwrap/
func BenchmarkStartToFirstByte(b *testing.B) {
	argv := []string{python, "-I", "-c", "import os; os.write(1, b'x')"}
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			time.Sleep(20 * time.Millisecond)
			b.StartTimer()
			cmd := exec.Command(argv[0], argv[1:]...)
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			firstByte(b, out)
			b.StopTimer()
			_ = cmd.Wait()
			b.StartTimer()
		}
	})
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"sandbox", Config{}},
		{"sandbox from a spare launcher", Config{Spares: 2}},
		{"sandbox from the fork server", Config{ForkServer: true, forkOnly: true}},
		{"sandbox from a fork server spare", Config{ForkServer: true, forkOnly: true, Spares: 2}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := bc.cfg
			cfg.CgroupRoot = benchCgroupRoot
			e, err := New(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = e.Close() }()
			if err := e.Check(b.Context()); err != nil {
				b.Fatal(err)
			}
			spec := engine.Spec{
				ID: "bench", Argv: argv,
				Env:    map[string]string{"HOME": "/workspace", "PWD": "/workspace"},
				Limits: engine.Limits{MemoryBytes: 512 << 20, Pids: 128, CPUs: 1, TmpBytes: 64 << 20, WorkspaceBytes: 128 << 20, OpenFiles: 256},
			}
			for b.Loop() {
				b.StopTimer()
				time.Sleep(20 * time.Millisecond)
				b.StartTimer()
				p, err := e.Start(b.Context(), spec)
				if err != nil {
					b.Fatal(err)
				}
				firstByte(b, p.Stdout())
				b.StopTimer()
				_ = p.Stdin().Close()
				go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
				_, _ = io.Copy(io.Discard, p.Stdout())
				if err := p.Wait(); err != nil {
					b.Fatal(err)
				}
				_ = p.Stdout().Close()
				_ = p.Stderr().Close()
				b.StartTimer()
			}
		})
	}
}

func firstByte(b *testing.B, r io.Reader) {
	b.Helper()
	var buf [1]byte
	if _, err := io.ReadFull(r, buf[:]); err != nil {
		b.Fatalf("no first byte: %v", err)
	}
}

// benchCgroupRoot can be pointed at an empty directory to measure without
// cgroups.
var benchCgroupRoot = "/sys/fs/cgroup"

// BenchmarkBurst starts 50 sandboxed `python3 -I` at once, as a burst of
// new sessions does, and reports the time to each one's first byte (p50
// and slowest) and the CPU time each sandbox cost: in its own processes,
// and in sandboxd (cgroups, pipes, the engine). Run:
//
//	go test -run '^$' -bench Burst -benchtime 3x ./sandboxd/internal/engine/bwrap/
func BenchmarkBurst(b *testing.B) {
	const n = 50
	argv := []string{python, "-I", "-c", "import os; os.write(1, b'x'); os.read(0, 1)"}
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"bwrap", Config{}},
		{"fork server", Config{ForkServer: true, forkOnly: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := bc.cfg
			cfg.CgroupRoot = benchCgroupRoot
			e, err := New(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = e.Close() }()
			if err := e.Check(b.Context()); err != nil {
				b.Fatal(err)
			}
			spec := engine.Spec{
				ID: "burst", Argv: argv,
				Env:    map[string]string{"HOME": "/workspace", "PWD": "/workspace"},
				Limits: engine.Limits{MemoryBytes: 512 << 20, Pids: 128, TmpBytes: 64 << 20, WorkspaceBytes: 128 << 20, OpenFiles: 256},
			}
			warm, err := e.Start(b.Context(), spec) // the fork server starts with the first
			if err != nil {
				b.Fatal(err)
			}
			firstByte(b, warm.Stdout())
			_ = warm.Kill()
			_ = warm.Wait()
			var took []time.Duration
			var self, children time.Duration
			for b.Loop() {
				b.StopTimer()
				time.Sleep(200 * time.Millisecond)
				s0, c0 := rusage(syscall.RUSAGE_SELF), rusage(syscall.RUSAGE_CHILDREN)
				b.StartTimer()
				ps := make([]engine.Process, n)
				ds := make([]time.Duration, n)
				var wg sync.WaitGroup
				start := time.Now()
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						p, err := e.Start(b.Context(), spec)
						if err != nil {
							b.Error(err)
							return
						}
						firstByte(b, p.Stdout())
						ds[i], ps[i] = time.Since(start), p
					}()
				}
				wg.Wait()
				b.StopTimer()
				for _, p := range ps {
					if p != nil {
						_ = p.Stdin().Close()
						go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
						_, _ = io.Copy(io.Discard, p.Stdout())
						_ = p.Wait()
						_ = p.Stdout().Close()
						_ = p.Stderr().Close()
					}
				}
				s1, c1 := rusage(syscall.RUSAGE_SELF), rusage(syscall.RUSAGE_CHILDREN)
				self, children = self+s1-s0, children+c1-c0
				took = append(took, ds...)
				b.StartTimer()
			}
			slices.Sort(took)
			per := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(len(took)) }
			b.ReportMetric(float64(took[len(took)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(took[len(took)-1])/1e6, "slowest-ms")
			b.ReportMetric(per(children), "sandbox-cpu-ms/start")
			b.ReportMetric(per(self), "sandboxd-cpu-ms/start")
		})
	}
}

// rusage is the user and system CPU time of who.
func rusage(who int) time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
