package engine

import (
	"io"
	"log/slog"
	"os/exec"
	"testing"
)

// BenchmarkStartToExit measures `python3 -c pass` from Start to Wait in a
// sandbox (with cgroups and limits, as in production) against running it
// bare. Run: go test -run '^$' -bench StartToExit ./sandboxd/internal/engine/
func BenchmarkStartToExit(b *testing.B) {
	e, err := NewBwrap(BwrapConfig{CgroupRoot: benchCgroupRoot}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	if err := e.Check(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command(python, "-c", "pass").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sandbox", func(b *testing.B) {
		spec := Spec{
			ID: "bench", Argv: []string{python, "-c", "pass"},
			Env:    map[string]string{"HOME": "/workspace"},
			Limits: Limits{MemoryBytes: 512 << 20, Pids: 128, CPUs: 1, TmpBytes: 64 << 20, WorkspaceBytes: 128 << 20, OpenFiles: 256},
		}
		for b.Loop() {
			p, err := e.Start(b.Context(), spec)
			if err != nil {
				b.Fatal(err)
			}
			_ = p.Stdin().Close()
			go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
			go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
			if err := p.Wait(); err != nil {
				b.Fatal(err)
			}
			_ = p.Stdout().Close()
			_ = p.Stderr().Close()
		}
	})
}

// benchCgroupRoot can be pointed at an empty directory to measure without
// cgroups.
var benchCgroupRoot = "/sys/fs/cgroup"
