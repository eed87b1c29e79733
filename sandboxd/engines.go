package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
)

// selectEngine returns the checked engine cfg.Runtime names. With no
// runtime named it takes the first of bwrap, podman and docker that passes
// its check, and when none does the error says, for each, what to install.
func selectEngine(ctx context.Context, cfg Config, logger *slog.Logger) (engine.Engine, error) {
	if cfg.Runtime != "" {
		eng, err := newEngine(cfg, cfg.Runtime, logger)
		if err != nil {
			return nil, err
		}
		if err := eng.Check(ctx); err != nil {
			_ = eng.Close()
			return nil, err
		}
		return eng, nil
	}
	var reasons []string
	for _, name := range []string{"bwrap", "podman", "docker"} {
		eng, err := newEngine(cfg, name, logger)
		if err == nil {
			if err = eng.Check(ctx); err == nil {
				logger.Info("sandbox runtime detected", "runtime", name)
				return eng, nil
			}
			_ = eng.Close()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		reasons = append(reasons, fmt.Sprintf("%s: %s", name, strings.TrimPrefix(err.Error(), engine.ErrUnavailable.Error()+": ")))
	}
	return nil, fmt.Errorf("%w: no sandbox runtime works here. Install one: bubblewrap (`apt-get install bubblewrap`, the default), "+
		"or podman or docker with an image (MCP_BRIDGE_IMAGE); set MCP_BRIDGE_RUNTIME to choose. What each said: %s",
		engine.ErrUnavailable, strings.Join(reasons, "; "))
}

func newEngine(cfg Config, name string, logger *slog.Logger) (engine.Engine, error) {
	switch name {
	case "bwrap":
		return engine.NewBwrap(engine.BwrapConfig{Spares: cfg.LaunchSpares}, logger)
	case "podman", "docker":
		return engine.NewContainer(engine.ContainerConfig{
			Runtime:   name,
			Image:     cfg.Image,
			User:      cfg.ContainerUser,
			ExtraArgs: cfg.RuntimeArgs,
			CheckArgv: []string{cfg.Python, "-c", "pass"},
		}, logger)
	}
	return nil, errors.New("unknown runtime " + name)
}
