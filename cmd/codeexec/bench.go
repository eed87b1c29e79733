package main

import (
	"context"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/bench"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/services/flagenv"
)

// benchCommand measures latency, throughput and memory
// (cmd/codeexec/internal/bench).
type benchCommand struct{ s bench.Settings }

func (c *benchCommand) Bind(fs *flagenv.Set, e cli.Env) {
	c.s.Version = e.Version
	bench.Bind(fs, &c.s)
}

func (c *benchCommand) Run(ctx context.Context, _ []string, e cli.Env) error {
	return bench.Run(ctx, c.s, e.Stdout)
}
