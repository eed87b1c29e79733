package engine

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// shProcess is a Process that runs a shell script on the host.
type shProcess struct {
	Pipes
	cmd *exec.Cmd
}

func startSh(t *testing.T, script string) *shProcess {
	t.Helper()
	var ours, theirs [3]*os.File
	for i := range ours {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			ours[i], theirs[i] = w, r
		} else {
			ours[i], theirs[i] = r, w
		}
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = theirs[0], theirs[1], theirs[2]
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range theirs {
		_ = f.Close()
	}
	p := &shProcess{Pipes: NewPipes(ours[0], ours[1], ours[2]), cmd: cmd}
	go func() { p.Exit(cmd.Wait()) }()
	return p
}

func (p *shProcess) Kill() error        { return p.cmd.Process.Kill() }
func (p *shProcess) Usage() Usage       { return Usage{} }
func (p *shProcess) Pause() error       { return errors.ErrUnsupported }
func (p *shProcess) Resume() error      { return errors.ErrUnsupported }
func (p *shProcess) PidsLimitHit() bool { return false }
func (p *shProcess) PID() int           { return p.cmd.Process.Pid }

func TestCollect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, script, stdin string
		timeout             time.Duration
		want                Output
		wantErr             bool
	}{
		{name: "exits", script: `cat; echo oops >&2`, stdin: "in\n", timeout: 10 * time.Second,
			want: Output{Stdout: "in\n", Stderr: "oops\n"}},
		{name: "fails", script: `echo out; exit 3`, timeout: 10 * time.Second,
			want: Output{Stdout: "out\n"}, wantErr: true},
		{name: "killed", script: `exec sleep 100`, timeout: 500 * time.Millisecond,
			want: Output{Killed: true}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
			defer cancel()
			got := Collect(ctx, startSh(t, tc.script), tc.stdin)
			var exit *exec.ExitError
			if (got.Err != nil) != tc.wantErr || got.Err != nil && !errors.As(got.Err, &exit) {
				t.Errorf("Err = %v, want an exit error: %v", got.Err, tc.wantErr)
			}
			got.Err = nil
			if got != tc.want {
				t.Errorf("Collect = %+v, want %+v", got, tc.want)
			}
		})
	}
}
