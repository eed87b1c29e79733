package main

import (
	"context"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/bench"
	"github.com/codeexec/codeexec/services/flagenv"
)

// runBench measures latency, throughput and memory (cmd/codeexec/internal/bench).
func runBench(ctx context.Context, args []string, e env) error {
	fs := flagenv.New("bench", e.getenv)
	s := bench.Settings{Version: version}
	bench.Bind(fs, &s)
	if err := parse(fs, args, e); err != nil {
		return err
	}
	return bench.Run(ctx, s, e.stdout)
}
