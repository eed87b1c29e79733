package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// TestE2EPathSettingsExpandHome runs codeexec as a client's JSON config
// would, in a working directory of its own, with path settings that start
// with ~, which no shell expanded: set in the environment, or as
// --flag=~/x, which a shell leaves alone. The tokens file and the agent
// root are under HOME and serve takes the token; health looks for its TLS
// files there, and memoryd copy for its bbolt file. Without HOME, the
// setting stops codeexec with a message naming it.
func TestE2EPathSettingsExpandHome(t *testing.T) {
	t.Parallel()
	const token = "cx-path-settings"
	for _, tc := range []struct {
		name string
		env  map[string]string // an empty value unsets; "$CWD" is the working directory
		args []string          // "$ADDR" is a free address
		// serve is true when the command must serve and take the token;
		// else it must fail saying want ("$HOME" is the home).
		serve bool
		want  string
	}{
		{"tokens file and agent root from the environment", map[string]string{"CODEEXEC_TOKENS_FILE": "~/tokens", "CODEEXEC_AGENT_ROOT": "~/agent"},
			[]string{"serve", "--http", "$ADDR"}, true, ""},
		{"tokens file and agent root as flags", nil, []string{"serve", "--http", "$ADDR", "--tokens-file=~/tokens", "--agent-root=~/agent"}, true, ""},
		{"TLS files", nil, []string{"health", "--grpc-tls-cert=~/c.pem", "--grpc-tls-key=~/k.pem", "--grpc-tls-ca=~/ca.pem", "127.0.0.1:1"}, false,
			"gRPC TLS: load certificate $HOME/c.pem and key $HOME/k.pem"},
		{"bbolt file of memoryd copy", nil, []string{"memoryd", "copy", "--from=~/a.db", "--to=~/b.db"}, false, "no bbolt database at $HOME/a.db"},
		{"no home", map[string]string{"HOME": "", "MCP_BRIDGE_STATE_DIR": "$CWD/state", "CODEEXEC_TOKENS_FILE": "~/tokens"}, []string{"serve", "--http", "$ADDR"}, false,
			"CODEEXEC_TOKENS_FILE ~/tokens starts with ~ and HOME is not set: set CODEEXEC_TOKENS_FILE (--tokens-file) to an absolute path, or set HOME"},
		{"no home, a flag", map[string]string{"HOME": ""}, []string{"health", "--grpc-tls-ca=~/ca.pem", "127.0.0.1:1"}, false,
			`invalid value "~/ca.pem" for flag -grpc-tls-ca: path ~/ca.pem starts with ~ and HOME is not set: give an absolute path, or set HOME`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			home, cwd, addr := t.TempDir(), t.TempDir(), harness.FreeAddr(t)
			tokens, err := os.ReadFile(harness.TokensFile(t, map[string]string{token: "alice"}))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, "tokens"), tokens, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(home, "agent"), 0o755); err != nil {
				t.Fatal(err)
			}
			set := map[string]string{}
			for k, v := range tc.env {
				set[k] = strings.ReplaceAll(v, "$CWD", cwd)
			}
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.ReplaceAll(a, "$ADDR", addr)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, harness.Binary, args...)
			cmd.Env, cmd.Dir = homeEnv(t, home, set), cwd
			logs := &harness.LockedBuffer{}
			cmd.Stdout, cmd.Stderr = logs, logs
			if !tc.serve {
				if err := cmd.Run(); err == nil || !strings.Contains(logs.String(), strings.ReplaceAll(tc.want, "$HOME", home)) {
					t.Errorf("codeexec %v: %v, want a failure saying %q:\n%s", args, err, strings.ReplaceAll(tc.want, "$HOME", home), harness.TailOf(logs.String(), 3000))
				}
				return
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				_ = cmd.Process.Signal(harness.InterruptSignal)
				if err := <-exited; err != nil && !t.Failed() {
					t.Errorf("serve did not stop cleanly on SIGTERM: %v\n%s", err, harness.TailOf(logs.String(), 3000))
				}
			}()
			base := "http://" + addr
			for !logs.Await("codeexec serving", 100*time.Millisecond) {
				select {
				case err := <-exited:
					exited <- err
					t.Fatalf("serve exited: %v\n%s", err, harness.TailOf(logs.String(), 3000))
				case <-ctx.Done():
					t.Fatalf("serve did not start:\n%s", harness.TailOf(logs.String(), 3000))
				default:
				}
			}
			harness.WaitHTTP(t, base+"/healthz")
			if resp, _ := rawInitialize(t, base, map[string]string{"Authorization": "Bearer " + token}); resp.StatusCode != http.StatusOK {
				t.Errorf("the token in ~/tokens got %d, want 200", resp.StatusCode)
			}
			if agents, _ := filepath.Glob(filepath.Join(home, "agent", "codeexec-agent-*")); len(agents) == 0 {
				t.Errorf("no agent directory in ~/agent:\n%s", harness.TailOf(logs.String(), 3000))
			}
		})
	}
}
