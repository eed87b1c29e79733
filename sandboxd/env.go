package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/codeexec/codeexec/sandboxd/internal/engine/container"
	"github.com/codeexec/codeexec/sandboxd/internal/environment"
)

// upstreamImage is the container image on the host's /usr when none is
// given: upstream's default.
const upstreamImage = "python:3.14-slim"

// sandboxEnv is the environment sandboxes run in: env (nil on the host's
// /usr), its ID as checkpoints record it, and the store it came from.
type sandboxEnv struct {
	env   *environment.Env
	id    string
	store *environment.Store
}

// selectEnv finds cfg's environment. With no name it takes the default
// one when that is built, and the host's /usr otherwise, saying so.
func selectEnv(cfg Config, logger *slog.Logger) (*sandboxEnv, error) {
	store := environment.Open(cfg.EnvDir)
	se := &sandboxEnv{id: environment.Host, store: store}
	name := cfg.Env
	switch name {
	case environment.Host:
		return se, nil
	case "":
		name = environment.DefaultName
	}
	env, err := store.Get(name)
	switch {
	case err == nil:
		se.env, se.id = env, env.ID
		logger.Info("sandboxes run in an environment", "env", env.Label(), "python", env.Python, "root", env.Root)
		return se, nil
	case cfg.Env == "" && errors.Is(err, environment.ErrNotFound):
		logger.Info("no environment is built: sandboxes run on the host's /usr; `codeexec env build` builds one with Python 3.13 and the data stack", "env_dir", store.Dir)
		return se, nil
	}
	return nil, err
}

// image is the image the container engines run, imported from the
// environment's tree when it is not there yet; and the environment's ID
// as the image's label gives it, for an image given by name.
func (se *sandboxEnv) image(ctx context.Context, cfg Config, logger *slog.Logger) (string, error) {
	container := cfg.Runtime == "podman" || cfg.Runtime == "docker"
	switch {
	case cfg.Image != "":
		if container {
			if id := imageEnv(ctx, cfg.Runtime, cfg.Image); id != "" {
				se.id = id
			}
		}
		return cfg.Image, nil
	case se.env == nil:
		return upstreamImage, nil
	}
	image := EnvImage(se.env)
	if container {
		logger.Info("importing the environment into the container runtime, unless it has it (a minute or more; `codeexec env image NAME RUNTIME` does it ahead)", "env", se.env.Label(), "image", image, "runtime", cfg.Runtime)
		imported, err := importRoot(ctx, cfg.Runtime, se.env.Root, image, se.env.ID)
		if err != nil {
			return "", fmt.Errorf("environment %s: %w", se.env.Label(), err)
		}
		if imported {
			logger.Info("imported the environment", "image", image)
		}
	}
	return image, nil
}

// Seams for tests.
var (
	imageEnv = func(ctx context.Context, cli, image string) string {
		return container.ImageLabel(ctx, cli, image, container.LabelEnv)
	}
	importRoot = container.ImportRoot
)

// envChange says what changed between the environment a checkpoint was
// made in and this one.
func (se *sandboxEnv) envChange(from string) string {
	return environment.Change(from, se.id, se.store.Manifest)
}
