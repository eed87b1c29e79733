// Package detect picks sandboxd's engine: the runtime the configuration
// names, or the first of bwrap, podman and docker that works on this host.
// It is the one place that knows every engine, so that the engine package
// itself (the interface and the selection rules) imports none of them.
package detect

import (
	"context"
	"log/slog"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/bwrap"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/container"
)

// Engine returns the checked engine runtime names ("bwrap", "podman" or
// "docker"), or with "" the first of them that works here (see
// engine.Select). bw configures bwrap; ctr configures podman and docker,
// its Runtime filled in for each.
func Engine(ctx context.Context, runtime string, bw bwrap.Config, ctr container.Config, logger *slog.Logger) (engine.Engine, error) {
	return engine.Select(ctx, runtime, candidates(bw, ctr, logger), logger)
}

// candidates are the runtimes sandboxd offers, in the order detection
// tries them.
func candidates(bw bwrap.Config, ctr container.Config, logger *slog.Logger) []engine.Candidate {
	containerRuntime := func(name string) engine.Candidate {
		return engine.Candidate{Name: name, New: func() (engine.Engine, error) {
			cfg := ctr
			cfg.Runtime = name
			c, err := container.New(cfg, logger)
			if err != nil {
				return nil, err // not a typed nil in the interface
			}
			return c, nil
		}}
	}
	return []engine.Candidate{
		{Name: "bwrap", New: func() (engine.Engine, error) {
			b, err := bwrap.New(bw, logger)
			if err != nil {
				return nil, err
			}
			return b, nil
		}},
		containerRuntime("podman"),
		containerRuntime("docker"),
	}
}
