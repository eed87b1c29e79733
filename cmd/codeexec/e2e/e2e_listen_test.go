package e2e

import (
	"context"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// TestE2EHTTPPortInUseFailsBeforeAnythingStarts holds the port codeexec
// is told to serve on: it exits at once, naming the address and the cause,
// before any sandbox starts or the database is opened.
func TestE2EHTTPPortInUseFailsBeforeAnythingStarts(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", harness.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Binary, "serve", "--http", addr)
	cmd.Env = harness.BaseEnv(t, nil)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("codeexec serve on a port in use exited 0:\n%s", out)
	}
	text := string(out)
	for _, want := range []string{"listen for MCP over HTTP on " + addr, "address already in use"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	for _, started := range []string{"memory database opened", "sessions are durable", "codeexec serving"} {
		if strings.Contains(text, started) {
			t.Errorf("output shows %q: the port was bound after the services started:\n%s", started, text)
		}
	}
}

// TestE2EHTTPPortZeroServesOnTheChosenPort asks for port 0: the log's
// "codeexec serving" line names the port the kernel chose, and MCP is
// served there.
func TestE2EHTTPPortZeroServesOnTheChosenPort(t *testing.T) {
	t.Parallel()
	logs := harness.StartProcess(t, harness.BaseEnv(t, nil), "serve", "--http", "127.0.0.1:0")
	serving := regexp.MustCompile(`msg="codeexec serving" .*transport=http address=(127\.0\.0\.1:\d+)`)
	var addr string
	for deadline := time.Now().Add(60 * time.Second); addr == ""; time.Sleep(50 * time.Millisecond) {
		if m := serving.FindStringSubmatch(logs.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no \"codeexec serving\" line with an address within 60s:\n%s", logs.String())
		}
	}
	if strings.HasSuffix(addr, ":0") {
		t.Fatalf("the log names port 0, not the port bound: %s", addr)
	}
	c := harness.HTTPClient(t, "http://"+addr)
	if got := harness.Joined(harness.Code(t, c, "print(6 * 7)").Stdout()); got != "42" {
		t.Fatalf("run_python on the chosen port printed %q", got)
	}
}
