package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Pipes is what every engine's Process shares: the three pipes to the
// sandbox and its exit. Engines embed it, made by NewPipes at start, and
// call Exit once the sandbox has exited.
type Pipes struct {
	stdin          *os.File
	stdout, stderr *os.File

	done    chan struct{} // closed once the sandbox has exited and waitErr is set
	waitErr error
}

// NewPipes returns the Pipes of a sandbox started with these ends of its
// stdin, stdout and stderr (sandboxd's ends).
func NewPipes(stdin, stdout, stderr *os.File) Pipes {
	return Pipes{stdin: stdin, stdout: stdout, stderr: stderr, done: make(chan struct{})}
}

// Stdin implements Process.
func (p *Pipes) Stdin() io.WriteCloser { return p.stdin }

// Stdout implements Process.
func (p *Pipes) Stdout() io.ReadCloser { return p.stdout }

// Stderr implements Process.
func (p *Pipes) Stderr() io.ReadCloser { return p.stderr }

// Wait implements Process.
func (p *Pipes) Wait() error {
	<-p.done
	return p.waitErr
}

// Done is closed once Exit has been called.
func (p *Pipes) Done() <-chan struct{} { return p.done }

// Exited reports whether Exit has been called.
func (p *Pipes) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Exit records how the sandbox exited (err is what waiting for its
// outermost process returned) and ends Wait. Call it once, after every
// resource of the sandbox is released.
func (p *Pipes) Exit(err error) {
	if err != nil {
		err = fmt.Errorf("sandbox exited: %w", err)
	}
	p.waitErr = err
	close(p.done)
}

// ValidateSpec checks what every engine needs of a Spec. badValue lists
// the characters an environment value may not hold on this engine.
func ValidateSpec(spec Spec, badValue, badValueName string) error {
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
