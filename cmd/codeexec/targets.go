package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/memdb"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/process"
	"github.com/codeexec/codeexec/services/flagenv"
)

// A target is one service of the suite. Alone (`codeexec <name>`) it is a
// process of its own: a gRPC server on --listen that finds the others
// through address flags, or, for the gateway, MCP on stdio or --http with
// sandboxd at --sandbox. In `codeexec serve` every target runs in one
// process and they reach one another through one in-memory gRPC server
// (services/suite).
type target struct {
	name string
	// listen and metrics are where a gRPC target serves alone (listenEnv
	// names listen's environment variable); the gateway has neither.
	listen, listenEnv, metrics string
	// of is the target's own settings among every target's.
	of func(*units) unit
	// sub are subcommands, `codeexec <name> <sub> …`.
	sub map[string]func(context.Context, []string, cli.Env) error
}

// A unit is a target's settings and what they start.
type unit interface {
	// bind binds the flags the target uses wherever it runs; alone, also
	// those it uses only then (where the other targets are).
	bind(fs *flagenv.Set, e cli.Env, alone bool)
	// check completes and validates the parsed settings before anything
	// starts.
	check() error
	// start starts the target in p, registered on p's gRPC server.
	start(ctx context.Context, p *process.Process) error
	// serve serves the target's clients until ctx ends, alone: gRPC on
	// --listen, or MCP for the gateway.
	serve(ctx context.Context, p *process.Process, e cli.Env) error
}

// units are the settings of every target, one of each.
type units struct {
	memoryd    memorydUnit
	discoveryd discoverydUnit
	sandboxd   sandboxdUnit
	gateway    gatewayUnit
}

var (
	memorydTarget = target{name: "memoryd", listen: "127.0.0.1:9004", listenEnv: "CODEEXEC_MEMORYD_LISTEN", metrics: "127.0.0.1:9104",
		of: func(u *units) unit { return &u.memoryd },
		sub: map[string]func(context.Context, []string, cli.Env) error{
			"backup": cli.Flagged("memoryd backup", func() cli.Command { return &memdb.BackupCommand{} }),
			"copy":   cli.Flagged("memoryd copy", func() cli.Command { return &memdb.CopyCommand{} }),
		}}
	discoverydTarget = target{name: "discoveryd", listen: "127.0.0.1:9003", listenEnv: "CODEEXEC_DISCOVERYD_LISTEN", metrics: "127.0.0.1:9103",
		of: func(u *units) unit { return &u.discoveryd }}
	sandboxdTarget = target{name: "sandboxd", listen: "127.0.0.1:9002", listenEnv: "CODEEXEC_SANDBOXD_LISTEN", metrics: "127.0.0.1:9102",
		of: func(u *units) unit { return &u.sandboxd }}
	gatewayTarget = target{name: "gateway",
		of: func(u *units) unit { return &u.gateway }}
)

// grpc reports whether t is a gRPC service (not the gateway).
func (t target) grpc() bool { return t.listen != "" }

// targets are the suite in the order serve starts them: each calls only
// those before it.
var targets = []target{memorydTarget, discoverydTarget, sandboxdTarget, gatewayTarget}

// defaultGRPCGrace bounds a graceful stop of the services whose calls are
// short (discoveryd, memoryd); sandboxd's is --shutdown-grace.
const defaultGRPCGrace = 15 * time.Second

// shortCalls is the check and serve of a gRPC target whose calls are
// short: it has nothing to check, and stops within defaultGRPCGrace.
type shortCalls struct{}

func (shortCalls) check() error { return nil }

func (shortCalls) serve(ctx context.Context, p *process.Process, _ cli.Env) error {
	return p.ServeGRPC(ctx, defaultGRPCGrace)
}

// targetCommand is the command that runs t alone, or one of its
// subcommands.
func targetCommand(t target, usage ...[2]string) command {
	alone := cli.Flagged(t.name, func() cli.Command { return &aloneCommand{t: t} })
	return newCommand(func(ctx context.Context, args []string, e cli.Env) error {
		if len(args) > 0 {
			if sub, ok := t.sub[args[0]]; ok {
				return sub(ctx, args[1:], e)
			}
			if len(t.sub) > 0 && !strings.HasPrefix(args[0], "-") {
				fmt.Fprintf(e.Stderr, "codeexec %s: unknown subcommand %q: %s takes %s, or flags only (see \"codeexec help\")\n",
					t.name, args[0], t.name, strings.Join(slices.Sorted(maps.Keys(t.sub)), ", "))
				return cli.ErrUsage
			}
		}
		return alone(ctx, args, e)
	}, usage...)
}

// aloneCommand runs t alone.
type aloneCommand struct {
	t      target
	common process.Common
	all    units
	listen string
}

func (c *aloneCommand) Bind(fs *flagenv.Set, e cli.Env) {
	process.BindCommon(fs, &c.common, true, c.t.metrics)
	c.t.of(&c.all).bind(fs, e, true)
	if c.t.grpc() {
		fs.String(&c.listen, "listen", c.t.listen, "gRPC address: host:port or unix:/path", c.t.listenEnv)
	}
}

func (c *aloneCommand) Run(ctx context.Context, _ []string, e cli.Env) error {
	u := c.t.of(&c.all)
	if err := u.check(); err != nil {
		return err
	}
	p, err := process.New(ctx, c.t.name, &c.common, e.Stderr)
	if err != nil {
		return err
	}
	defer p.Close()
	if c.t.grpc() {
		p.ServeOn(c.listen, c.common.Metrics)
	}
	// Background loops end when serving does, even on an error.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := u.start(ctx, p); err != nil {
		return err
	}
	return u.serve(ctx, p, e)
}
