package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// runBinary runs the binary to its end and returns its exit status and
// output. One still running after 30 s is killed (status -1): a command
// that should have refused its command line serves instead.
func runBinary(t *testing.T, env []string, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Binary, args...)
	cmd.Env = env
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		status = exit.ExitCode()
	case err != nil:
		t.Fatalf("codeexec %v: %v", args, err)
	}
	return status, out.String(), errOut.String()
}

// TestE2EStrayArguments runs commands with a word left after their flags:
// a command that takes flags only refuses it with status 2, naming the word
// and the flags after it that Go's flag parsing would have dropped, before
// anything starts; the commands that take words after their flags still
// get them.
func TestE2EStrayArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		status int
		want   []string
	}{
		{[]string{"serve", "stdio", "--http", "127.0.0.1:18937", "--timeout", "5s"}, 2,
			[]string{`codeexec serve: unexpected argument "stdio": serve takes flags only`, "(--http --timeout) were not read", "flags go before any other word"}},
		{[]string{"run", "--timeout", "5s", "stdio"}, 2, []string{`unexpected argument "stdio": serve takes flags only`}},
		{[]string{"serve", "--fork-server", "false"}, 2, []string{`unexpected argument "false"`, "--fork-server=false"}},
		{[]string{"gateway", "--", "stdio"}, 2, []string{`codeexec gateway: unexpected argument "stdio"`}},
		{[]string{"sandboxd", "x"}, 2, []string{`codeexec sandboxd: unexpected argument "x": sandboxd takes flags only`}},
		{[]string{"discoveryd", "x"}, 2, []string{`codeexec discoveryd: unexpected argument "x"`}},
		{[]string{"memoryd", "x"}, 2, []string{`codeexec memoryd: unknown subcommand "x": memoryd takes backup, copy, or flags only`}},
		{[]string{"memoryd", "--listen", "127.0.0.1:0", "x"}, 2, []string{`codeexec memoryd: unexpected argument "x"`}},
		{[]string{"memoryd", "copy", "--from", "a.db", "--to", "b.db", "x"}, 2, []string{`codeexec memoryd copy: unexpected argument "x"`}},
		{[]string{"bench", "x"}, 2, []string{`codeexec bench: unexpected argument "x"`}},
		{[]string{"version", "x"}, 2, []string{`unexpected argument "x"`}},
		{[]string{"serve", "--no-such-flag"}, 2, []string{"flag provided but not defined: -no-such-flag"}},
		// Words these commands take reach them: a failure of their own is
		// status 1.
		{[]string{"health", "127.0.0.1:1"}, 1, []string{"health check of 127.0.0.1:1"}},
		{[]string{"import-upstream", "/nonexistent/dir"}, 1, []string{"/nonexistent/dir is not a directory"}},
		{[]string{"token", "add", "alpha"}, 0, []string{"token for tenant alpha"}},
		{[]string{"health"}, 2, []string{"usage: codeexec health"}},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			t.Parallel()
			status, _, stderr := runBinary(t, harness.BaseEnv(t, nil), tc.args...)
			if status != tc.status {
				t.Errorf("codeexec %v: status %d, want %d; stderr:\n%s", tc.args, status, tc.status, harness.TailOf(stderr, 2000))
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("codeexec %v: stderr does not say %q:\n%s", tc.args, w, harness.TailOf(stderr, 2000))
				}
			}
			if tc.status == 2 && strings.Contains(stderr, "codeexec serving") {
				t.Errorf("codeexec %v started serving:\n%s", tc.args, harness.TailOf(stderr, 2000))
			}
		})
	}
}

// TestE2EHelpIsNoError asks every command for its help: it goes to stdout
// with status 0, as `codeexec -h` does, so that `codeexec serve -h | less`
// works and a script asking for help sees no failure.
func TestE2EHelpIsNoError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, "Usage:"},
		{[]string{"help"}, "Usage:"},
		{[]string{"serve", "-h"}, "Usage of serve:"},
		{[]string{"serve", "--help"}, "Usage of serve:"},
		{[]string{"run", "-help"}, "Usage of serve:"},
		{[]string{"gateway", "-h"}, "Usage of gateway:"},
		{[]string{"sandboxd", "--help"}, "Usage of sandboxd:"},
		{[]string{"discoveryd", "-h"}, "Usage of discoveryd:"},
		{[]string{"memoryd", "-h"}, "Usage of memoryd:"},
		{[]string{"memoryd", "backup", "-h"}, "Usage of memoryd backup:"},
		{[]string{"memoryd", "copy", "--help"}, "Usage of memoryd copy:"},
		{[]string{"import-upstream", "-h"}, "Usage of import-upstream:"},
		{[]string{"bench", "-h"}, "Usage of bench:"},
		{[]string{"health", "-h"}, "Usage of health:"},
		{[]string{"token", "-h"}, "codeexec token add TENANT"},
		{[]string{"token", "--help"}, "codeexec token add TENANT"},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			t.Parallel()
			status, stdout, stderr := runBinary(t, harness.BaseEnv(t, nil), tc.args...)
			if status != 0 || !strings.Contains(stdout, tc.want) {
				t.Errorf("codeexec %v: status %d, want 0 with %q on stdout; stdout:\n%s\nstderr:\n%s",
					tc.args, status, tc.want, harness.TailOf(stdout, 500), harness.TailOf(stderr, 500))
			}
		})
	}
}

// TestE2EStateDirIsResolvedOnce starts serve as a client's JSON config
// would, in a working directory of its own: a state dir or --db starting
// with ~ is under HOME (no shell expanded it), a relative one is made
// absolute and logged, and without HOME the default ~/MCPs stops serve
// with a message naming MCP_BRIDGE_STATE_DIR instead of creating a
// database in the working directory.
func TestE2EStateDirIsResolvedOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string // "$HOME" and "$CWD" are the test's directories
		// db is the database that must exist afterwards; empty means
		// serve must refuse to start with want on stderr.
		db, want string
	}{
		{"tilde", map[string]string{"MCP_BRIDGE_STATE_DIR": "~/MCPs"}, "$HOME/MCPs/codeexec.db", "state.dir=$HOME/MCPs"},
		{"relative", map[string]string{"MCP_BRIDGE_STATE_DIR": "state"}, "$CWD/state/codeexec.db", "state.dir=$CWD/state"},
		{"db tilde", map[string]string{"MCP_BRIDGE_STATE_DIR": "~/MCPs", "CODEEXEC_DB": "~/memory.db"}, "$HOME/memory.db", "store.path=$HOME/memory.db"},
		{"no home", map[string]string{"HOME": "", "MCP_BRIDGE_STATE_DIR": ""}, "",
			"state directory ~/MCPs starts with ~ and HOME is not set: set MCP_BRIDGE_STATE_DIR (--state-dir) to an absolute directory"},
		{"no home tilde", map[string]string{"HOME": "", "MCP_BRIDGE_STATE_DIR": "~/MCPs"}, "", "starts with ~ and HOME is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			home, cwd := t.TempDir(), t.TempDir()
			expand := strings.NewReplacer("$HOME", home, "$CWD", cwd).Replace
			env := homeEnv(t, home, tc.env)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, harness.Binary, "serve")
			cmd.Env, cmd.Dir = env, cwd
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			logs := &harness.LockedBuffer{}
			cmd.Stderr = logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tc.db != "" && !logs.Await("codeexec serving", 45*time.Second) {
				t.Errorf("serve did not start:\n%s", harness.TailOf(logs.String(), 3000))
			}
			_ = stdin.Close() // stdio's end stops serve
			err = cmd.Wait()
			out := logs.String()
			if tc.db == "" {
				if err == nil || !strings.Contains(out, tc.want) {
					t.Errorf("serve: %v, want a refusal saying %q:\n%s", err, tc.want, harness.TailOf(out, 3000))
				}
			} else {
				if _, err := os.Stat(expand(tc.db)); err != nil {
					t.Errorf("the database is not at %s: %v", expand(tc.db), err)
				}
				if !strings.Contains(out, expand(tc.want)) {
					t.Errorf("the log does not say %s:\n%s", expand(tc.want), harness.TailOf(out, 3000))
				}
			}
			// Nothing is made in the working directory but what a
			// relative path names.
			entries, _ := os.ReadDir(cwd)
			for _, e := range entries {
				if !strings.HasPrefix(expand(tc.db), filepath.Join(cwd, e.Name())+"/") {
					t.Errorf("serve made %s in its working directory", e.Name())
				}
			}
		})
	}
}

// homeEnv is the binary's environment with HOME=home and set over it,
// where an empty value unsets the variable.
func homeEnv(t *testing.T, home string, set map[string]string) []string {
	t.Helper()
	var env []string
	for _, kv := range harness.BaseEnv(t, map[string]string{"HOME": home}) {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := set[k]; ok {
			if v == "" {
				continue // unset
			}
			kv = k + "=" + v
		}
		env = append(env, kv)
	}
	for k, v := range set {
		if v != "" && !slices.Contains(env, k+"="+v) {
			env = append(env, k+"="+v)
		}
	}
	return env
}
