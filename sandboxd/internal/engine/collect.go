package engine

import (
	"bytes"
	"context"
	"io"
	"sync"
)

// Output is what a sandbox that Collect ran to its end wrote, and how it
// ended.
type Output struct {
	// Stdout and Stderr are everything the sandbox wrote.
	Stdout, Stderr string
	// Err is what Wait returned.
	Err error
	// Killed reports that ctx ended before the sandbox did, so Collect
	// killed it.
	Killed bool
}

// Collect writes stdin to p and closes p's stdin, then reads p's stdout
// and stderr until p exits, killing p if ctx ends first, and closes them:
// a trial sandbox's run, or a test's.
func Collect(ctx context.Context, p Process, stdin string) Output {
	var stdout, stderr bytes.Buffer
	var read sync.WaitGroup
	read.Add(2)
	go func() { defer read.Done(); _, _ = io.Copy(&stdout, p.Stdout()) }()
	go func() { defer read.Done(); _, _ = io.Copy(&stderr, p.Stderr()) }()
	_, _ = io.WriteString(p.Stdin(), stdin)
	_ = p.Stdin().Close()
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	var out Output
	select {
	case out.Err = <-waited:
	case <-ctx.Done():
		_ = p.Kill()
		out.Err, out.Killed = <-waited, true
	}
	read.Wait()
	_ = p.Stdout().Close()
	_ = p.Stderr().Close()
	out.Stdout, out.Stderr = stdout.String(), stderr.String()
	return out
}
