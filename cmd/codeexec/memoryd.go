package main

import (
	"context"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/memdb"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/process"
	"github.com/codeexec/codeexec/memoryd"
	"github.com/codeexec/codeexec/services/flagenv"
)

// memorydUnit is memoryd's settings.
type memorydUnit struct {
	shortCalls
	st memdb.Settings
}

func (u *memorydUnit) bind(fs *flagenv.Set, e cli.Env, _ bool) {
	memdb.BindStateDir(fs, &u.st, e.Getenv)
	memdb.BindMemory(fs, &u.st)
}

func (u *memorydUnit) start(ctx context.Context, p *process.Process) error {
	cfg := u.st.Config(version)
	cfg.Registerer = p.Registry
	logger := p.ServiceLogger("memoryd")
	svc, err := memoryd.New(cfg, logger)
	if err == nil && p.InProc != nil {
		// The embedded default imports an upstream user's state.
		memdb.ImportOnFirstStart(ctx, svc, u.st.StateDir, logger)
	}
	return p.Register(svc, err)
}
