package bwrap

import (
	"io"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
)

// BenchmarkStartToFirstByte measures how long a sandboxed `python3 -I`
// takes to write its first byte after Start (with cgroups and limits, as
// in production), with and without spare launchers, against the same
// interpreter run bare. Starts are 20 ms apart, outside the timer, as
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
		name   string
		spares int
	}{{"sandbox", 0}, {"sandbox from a spare launcher", 2}} {
		b.Run(bc.name, func(b *testing.B) {
			e, err := New(Config{CgroupRoot: benchCgroupRoot, Spares: bc.spares}, slog.New(slog.DiscardHandler))
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
