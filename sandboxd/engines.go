package sandboxd

import (
	"context"
	"log/slog"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/bwrap"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/container"
)

// selectEngine returns the checked engine cfg.Runtime names, or with none
// named the first of bwrap, podman and docker that works here (see
// engine.Select).
func selectEngine(ctx context.Context, cfg Config, logger *slog.Logger) (engine.Engine, error) {
	return engine.Select(ctx, cfg.Runtime, candidates(cfg, logger), logger)
}

// candidates are the runtimes sandboxd offers, in the order detection
// tries them.
func candidates(cfg Config, logger *slog.Logger) []engine.Candidate {
	containerRuntime := func(name string) engine.Candidate {
		return engine.Candidate{Name: name, New: func() (engine.Engine, error) {
			c, err := container.New(container.Config{
				Runtime:   name,
				Image:     cfg.Image,
				User:      cfg.ContainerUser,
				ExtraArgs: cfg.RuntimeArgs,
				CheckArgv: []string{cfg.Python, "-c", "pass"},
			}, logger)
			if err != nil {
				return nil, err // not a typed nil in the interface
			}
			return c, nil
		}}
	}
	return []engine.Candidate{
		{Name: "bwrap", New: func() (engine.Engine, error) {
			b, err := bwrap.New(bwrap.Config{Spares: cfg.LaunchSpares, ForkServer: cfg.ForkServer}, logger)
			if err != nil {
				return nil, err
			}
			return b, nil
		}},
		containerRuntime("podman"),
		containerRuntime("docker"),
	}
}
