package main

import (
	"context"
	"io"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/bench"
	"github.com/codeexec/codeexec/services/flagenv"
)

// runBench measures latency, throughput and memory (cmd/codeexec/internal/bench).
func runBench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flagenv.New("bench", getenv)
	s := bench.Settings{Version: version}
	bench.Bind(fs, &s)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	return bench.Run(ctx, s, stdout)
}
