package main

import (
	"context"
	"errors"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/process"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/logkeys"
)

// serveCommand runs every target in one process: the embedded default
// that a desktop MCP client launches. The gRPC targets share one
// in-memory server (services/suite); the gateway serves MCP on stdio or
// --http.
type serveCommand struct {
	common process.Common
	all    units
}

func (c *serveCommand) Bind(fs *flagenv.Set, e cli.Env) {
	process.BindCommon(fs, &c.common, false, "")
	for _, t := range targets {
		t.of(&c.all).bind(fs, e, false)
	}
}

func (c *serveCommand) Run(ctx context.Context, _ []string, e cli.Env) error {
	all := &c.all
	all.share()
	// Bad settings are reported before anything opens or starts.
	var errs []error
	for _, t := range targets {
		errs = append(errs, t.of(all).check())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The sandbox socket goes in the state dir, as memoryd's check made
	// it absolute.
	all.sandboxd.socketDir = all.memoryd.st.StateDir
	// So is the key of the requestState, shared by the processes on it.
	all.gateway.stateDir = all.memoryd.st.StateDir
	p, err := process.New(ctx, "codeexec", &c.common, e.Stderr)
	if err != nil {
		return err
	}
	defer p.Close()
	// A port in use fails now, before the sandboxes start.
	if err := all.gateway.listen(p); err != nil {
		return err
	}
	if err := p.InMemory(); err != nil {
		return err
	}
	// The services outlive the signal: on SIGTERM the HTTP server first
	// lets running calls finish (--shutdown-grace), then they stop.
	signalled := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.OnClose(cancel) // a closer, not a defer: those run after it
	for _, t := range targets {
		if t.grpc() {
			if err := t.of(all).start(ctx, p); err != nil {
				return err
			}
		}
	}
	// The gateway calls the others through the in-memory server, which
	// stops once the gateway has closed, before the services close.
	p.InProc.Start(ctx)
	p.OnClose(func() { cancel(); _ = p.InProc.Wait() })
	// The sandboxes stop before that server: their durable sessions are
	// given up through memoryd, for the next process to take.
	p.OnClose(all.sandboxd.shutdown)
	gw := &all.gateway
	if err := gw.start(ctx, p); err != nil {
		return err
	}
	transport, address := gw.where()
	p.Logger.Info("codeexec serving", "transport", transport, logkeys.Address, address)
	if err := gw.serve(signalled, p, e); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// share makes the gateway and sandboxd agree in one process, where each
// setting they both use is bound once: the gateway's timeouts, sandboxd's
// output cap and idle timeout.
func (u *units) share() {
	g, s := &u.gateway.cfg, &u.sandboxd.cfg
	s.DefaultTimeout, s.MaxTimeout = g.DefaultTimeout, g.MaxTimeout
	g.OutputLimitBytes, g.SessionIdleTimeout = s.OutputLimitBytes, s.IdleTimeout
}
