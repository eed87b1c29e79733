package sandboxd

import (
	"context"

	"github.com/codeexec/codeexec/sandboxd/internal/engine/container"
	"github.com/codeexec/codeexec/sandboxd/internal/environment"
)

// The environments sandboxes run in (package environment): cmd's `env`
// commands build, list and remove them through these.
type (
	// EnvStore is a directory of environments.
	EnvStore = environment.Store
	// EnvBuildSpec is what `codeexec env build` asks for.
	EnvBuildSpec = environment.BuildSpec
	// Env is one built environment.
	Env = environment.Env
)

// OpenEnvStore returns the environment store in dir ("" for the default,
// /var/lib/codeexec/environments).
func OpenEnvStore(dir string) *EnvStore { return environment.Open(dir) }

// Environment names and places every command shares.
const (
	DefaultEnv      = environment.DefaultName
	HostEnv         = environment.Host
	DefaultEnvDir   = environment.DefaultDir
	DefaultCacheDir = environment.DefaultCacheDir
)

// DefaultEnvPackages are the Debian packages every environment gets.
func DefaultEnvPackages() []string { return append([]string(nil), environment.DefaultPackages...) }

// ImportEnvImage makes the container image tag for runtime ("docker" or
// "podman") from env's tree, unless it already holds that environment,
// and reports whether it imported it.
func ImportEnvImage(ctx context.Context, runtime string, env *Env, tag string) (bool, error) {
	return container.ImportRoot(ctx, runtime, env.Root, tag, env.ID)
}

// EnvImage is the image sandboxd runs for env under podman or docker when
// no --image is given: content-addressed, as env is.
func EnvImage(env *Env) string { return "localhost/codeexec-env:" + env.ID }
