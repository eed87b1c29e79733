package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// TestE2EStdioExitAfterACallWarnsOfNothing: a client that makes one call
// and closes stdin, as a client does when its user quits, is a normal end.
// The warm pool is refilling at that moment (the call took its sandbox),
// and a refill cut short used to log "warm pool sandbox failed its
// warm-up" with "context canceled" in about a third of such exits. The
// rounds give the race its chances; any warning or error fails. Each line
// names one service: serve's own lines "codeexec", a target's its own
// name, which used to come after serve's (service=codeexec
// service=sandboxd).
func TestE2EStdioExitAfterACallWarnsOfNothing(t *testing.T) {
	t.Parallel()
	// Under a container runtime a round takes seconds (a container made
	// and removed for the call and for the pool): the race the rounds are
	// for is the warm pool's, which the suite's bwrap run gives its ten
	// chances, so a few rounds check what containers add to an exit.
	rounds := 10
	if harness.ContainerRuntime() != "" {
		rounds = 3
	}
	for round := range rounds {
		s := harness.StartRawStdio(t, harness.BaseEnv(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "info"}))
		cmd, stdin, answers, logs := s.Cmd, s.Stdin, s.Lines, s.Logs
		send := func(m map[string]any) {
			b, _ := json.Marshal(m)
			if _, err := stdin.Write(append(b, '\n')); err != nil {
				t.Fatalf("round %d: write: %v", round, err)
			}
		}
		send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
			"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "codeexec-e2e", "version": "1"}}})
		if !answers.Scan() {
			t.Fatalf("round %d: no answer to initialize; stderr:\n%s", round, logs)
		}
		send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
		send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{
			"name": "run_python", "arguments": map[string]any{"code": "x = 1"}}})
		if !answers.Scan() || !strings.Contains(answers.Text(), `"id":2`) {
			t.Fatalf("round %d: no answer to the call (%q); stderr:\n%s", round, answers.Text(), logs)
		}
		_ = stdin.Close()
		for answers.Scan() { // what the server still writes, until it exits
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("round %d: codeexec serve exited with %v; stderr:\n%s", round, err, logs)
		}
		services := map[string]bool{}
		for line := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				t.Errorf("round %d: a normal exit logged %s", round, line)
			}
			if n := strings.Count(line, " service="); n > 1 {
				t.Errorf("round %d: a line names %d services: %s", round, n, line)
			}
			if _, after, ok := strings.Cut(line, " service="); ok {
				services[strings.Fields(after)[0]] = true
			}
		}
		if !services["codeexec"] || !services["sandboxd"] {
			t.Errorf("round %d: the services named in the logs are %v, want codeexec and sandboxd among them", round, services)
		}
	}
}
