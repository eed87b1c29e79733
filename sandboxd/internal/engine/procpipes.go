package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// procPipes is what every engine's Process shares: the three pipes to the
// sandbox and its exit. Engines embed it and fill it at start.
type procPipes struct {
	stdin          *os.File
	stdout, stderr *os.File

	done    chan struct{} // closed once the sandbox has exited and waitErr is set
	waitErr error
}

func newProcPipes(stdin, stdout, stderr *os.File) procPipes {
	return procPipes{stdin: stdin, stdout: stdout, stderr: stderr, done: make(chan struct{})}
}

// Stdin implements Process.
func (p *procPipes) Stdin() io.WriteCloser { return p.stdin }

// Stdout implements Process.
func (p *procPipes) Stdout() io.ReadCloser { return p.stdout }

// Stderr implements Process.
func (p *procPipes) Stderr() io.ReadCloser { return p.stderr }

// Wait implements Process.
func (p *procPipes) Wait() error {
	<-p.done
	return p.waitErr
}

// validateSpec checks what every engine needs of a Spec. badValue lists
// the characters an environment value may not hold on this engine.
func validateSpec(spec Spec, badValue, badValueName string) error {
	if len(spec.Argv) == 0 {
		return errors.New("start sandbox: empty Argv")
	}
	for k, v := range spec.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsAny(v, badValue) {
			return fmt.Errorf("start sandbox: invalid environment variable %q: names must be non-empty without '=' or NUL, values without %s", k, badValueName)
		}
	}
	return nil
}
