package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/flagenv"
)

// envUsage is `codeexec env`'s help.
const envUsage = `usage:
  codeexec env build [flags] [NAME]   build an environment (default: "default") from Debian trixie
      --apt PKG          a further Debian package (repeat, or separate by commas)
      --wheels DIR       install every wheel in DIR with pip (or those --requirements names)
      --requirements F   pip requirements, from --wheels DIR or the package index
  codeexec env list                   the environments built, their IDs, Python and size
  codeexec env rm NAME|ID             remove an environment
  codeexec env image NAME RUNTIME [TAG]  make NAME's container image for docker or podman ahead of
                                      serve (default TAG: localhost/codeexec-env:ID, which serve runs)
Every command takes --env-dir DIR (CODEEXEC_ENV_DIR, default /var/lib/codeexec/environments).
`

// runEnv is `codeexec env`.
func runEnv(ctx context.Context, args []string, e cli.Env) error {
	if len(args) > 0 {
		switch args[0] {
		case "build":
			return cli.Flagged("env build", func() cli.Command { return &envBuildCommand{} })(ctx, args[1:], e)
		case "list", "ls":
			return cli.Flagged("env list", func() cli.Command { return &envListCommand{} })(ctx, args[1:], e)
		case "rm", "remove":
			return cli.Flagged("env rm", func() cli.Command { return &envRmCommand{} })(ctx, args[1:], e)
		case "image":
			return cli.Flagged("env image", func() cli.Command { return &envImageCommand{} })(ctx, args[1:], e)
		case "-h", "--help", "help":
			fmt.Fprint(e.Stdout, envUsage)
			return nil
		}
		fmt.Fprintf(e.Stderr, "codeexec env: unknown command %q\n", args[0])
	}
	fmt.Fprint(e.Stderr, envUsage)
	return cli.ErrUsage
}

func bindEnvDir(fs *flagenv.Set, dir *string) {
	fs.Path(dir, "env-dir", "directory of the environments; default "+sandboxd.DefaultEnvDir, "CODEEXEC_ENV_DIR")
}

// envBuildCommand is `codeexec env build`.
type envBuildCommand struct {
	dir  string
	spec sandboxd.EnvBuildSpec
	apt  stringList
}

func (c *envBuildCommand) Bind(fs *flagenv.Set, _ cli.Env) {
	bindEnvDir(fs, &c.dir)
	fs.Var(&c.apt, "apt", "a further Debian package; repeat, or separate names by commas")
	fs.Path(&c.spec.Wheels, "wheels", "directory of wheels to install with pip (all of them, or those --requirements names)")
	fs.Path(&c.spec.Requirements, "requirements", "pip requirements file, installed from --wheels or the package index")
	fs.String(&c.spec.Mirror, "mirror", "", "Debian mirror; default: the one apt uses here", "CODEEXEC_DEBIAN_MIRROR")
	fs.String(&c.spec.CacheDir, "cache-dir", sandboxd.DefaultCacheDir, "where downloaded .debs and the Debian base are kept", "CODEEXEC_CACHE_DIR")
}

func (c *envBuildCommand) TakesArgs() {}

func (c *envBuildCommand) Run(ctx context.Context, args []string, e cli.Env) error {
	switch len(args) {
	case 0:
		c.spec.Name = sandboxd.DefaultEnv
	case 1:
		c.spec.Name = args[0]
	default:
		fmt.Fprintf(e.Stderr, "codeexec env build: one NAME at most, got %q; flags go before it\n", strings.Join(args, " "))
		return cli.ErrUsage
	}
	for _, a := range c.apt {
		c.spec.Apt = append(c.spec.Apt, strings.FieldsFunc(a, func(r rune) bool { return r == ',' || r == ' ' })...)
	}
	env, err := sandboxd.OpenEnvStore(c.dir).Build(ctx, c.spec, e.Stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "%s\t%s\tPython %s\t%d MiB\t%.0f s\n", env.Name, env.ID, env.Python, env.Bytes>>20, env.BuildSeconds)
	return nil
}

// envListCommand is `codeexec env list`.
type envListCommand struct{ dir string }

func (c *envListCommand) Bind(fs *flagenv.Set, _ cli.Env) { bindEnvDir(fs, &c.dir) }

func (c *envListCommand) Run(_ context.Context, _ []string, e cli.Env) error {
	store := sandboxd.OpenEnvStore(c.dir)
	envs, err := store.List()
	if err != nil {
		return err
	}
	if len(envs) == 0 {
		fmt.Fprintf(e.Stderr, "no environment is built in %s: `codeexec env build` builds the default one\n", store.Dir)
		return nil
	}
	w := tabwriter.NewWriter(e.Stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tID\tPYTHON\tPACKAGES\tSIZE\tBUILT\tEXTRA")
	for _, l := range envs {
		names := strings.Join(l.Names, ",")
		if names == "" {
			names = "(replaced)"
		}
		extra := strings.Join(append(append([]string{}, l.Apt...), l.Wheels...), " ")
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d MiB\t%s\t%s\n", names, l.ID, l.Python, len(l.Dists), l.Bytes>>20, l.Built.Format("2006-01-02 15:04"), extra)
	}
	return w.Flush()
}

// envRmCommand is `codeexec env rm`.
type envRmCommand struct{ dir string }

func (c *envRmCommand) Bind(fs *flagenv.Set, _ cli.Env) { bindEnvDir(fs, &c.dir) }

func (c *envRmCommand) TakesArgs() {}

func (c *envRmCommand) Run(_ context.Context, args []string, e cli.Env) error {
	if len(args) != 1 {
		fmt.Fprint(e.Stderr, "codeexec env rm: give one NAME or ID (see `codeexec env list`)\n")
		return cli.ErrUsage
	}
	what, err := sandboxd.OpenEnvStore(c.dir).Remove(args[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stderr, "removed %s\n", what)
	return nil
}

// envImageCommand is `codeexec env image`: the container image of an
// environment, as deploy/build-images.sh makes the sandbox image.
type envImageCommand struct{ dir string }

func (c *envImageCommand) Bind(fs *flagenv.Set, _ cli.Env) { bindEnvDir(fs, &c.dir) }

func (c *envImageCommand) TakesArgs() {}

func (c *envImageCommand) Run(ctx context.Context, args []string, e cli.Env) error {
	if len(args) < 2 || len(args) > 3 || (args[1] != "docker" && args[1] != "podman") {
		fmt.Fprint(e.Stderr, "codeexec env image: give NAME, docker or podman, and optionally the image's TAG (default: the one sandboxd runs, localhost/codeexec-env:ID), e.g. default docker localhost/codeexec-sandbox:latest\n")
		return cli.ErrUsage
	}
	env, err := sandboxd.OpenEnvStore(c.dir).Get(args[0])
	if err != nil {
		return err
	}
	tag := sandboxd.EnvImage(env)
	if len(args) == 3 {
		tag = args[2]
	}
	args = append(args[:2], tag)
	imported, err := sandboxd.ImportEnvImage(ctx, args[1], env, tag)
	if err != nil {
		return err
	}
	if imported {
		fmt.Fprintf(e.Stderr, "imported %s as %s into %s\n", env.Label(), args[2], args[1])
	} else {
		fmt.Fprintf(e.Stderr, "%s in %s already holds %s\n", args[2], args[1], env.Label())
	}
	return nil
}
