package main

import (
	"context"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/memdb"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/process"
	"github.com/codeexec/codeexec/memoryd"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/logkeys"
)

// memorydUnit is memoryd's settings.
type memorydUnit struct {
	shortCalls
	st    memdb.Settings
	alone bool
}

func (u *memorydUnit) bind(fs *flagenv.Set, e cli.Env, alone bool) {
	u.alone = alone
	memdb.BindStateDir(fs, &u.st, e.Getenv)
	memdb.BindMemory(fs, &u.st)
}

// check makes the state dir and the database path absolute, before serve
// hands the state dir to sandboxd.
func (u *memorydUnit) check() error { return u.st.Resolve(!u.alone) }

func (u *memorydUnit) start(ctx context.Context, p *process.Process) error {
	cfg := u.st.Config(version)
	cfg.Registerer = p.Registry
	logger := p.ServiceLogger("memoryd")
	if u.st.StateDir != "" {
		logger.InfoContext(ctx, "state directory", logkeys.StateDir, u.st.StateDir)
	}
	svc, err := memoryd.New(cfg, logger)
	if err == nil && p.InProc != nil {
		// The embedded default imports an upstream user's state.
		memdb.ImportOnFirstStart(ctx, svc, u.st.StateDir, logger)
	}
	return p.Register(svc, err)
}
