package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/codeexec/codeexec/gateway"
)

// StartProcess runs the codeexec binary with args until the test ends.
func StartProcess(t *testing.T, env []string, args ...string) *LockedBuffer {
	t.Helper()
	_, logs := StartCommand(t, env, args...)
	return logs
}

// StartCommand is startProcess that also returns the command, for tests
// that signal or kill it. At the end of the test it is sent SIGTERM and
// must stop within stopWithin.
func StartCommand(t *testing.T, env []string, args ...string) (*exec.Cmd, *LockedBuffer) {
	t.Helper()
	logs := &LockedBuffer{}
	cmd := exec.Command(Binary, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start codeexec %v: %v", args, err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(InterruptSignal)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		wait := stopWithin()
		select {
		case <-done:
		case <-time.After(wait):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("codeexec %v did not stop within %s of SIGTERM", args, wait)
		}
		if t.Failed() {
			t.Logf("codeexec %v output:\n%s", args, TailOf(logs.String(), 6000))
		}
	})
	return cmd, logs
}

// stopWithin is how long a stopping codeexec may take: 15 s with bwrap.
// Under docker or podman it removes each of its containers (the warm
// pool's, the spares', the sessions', one being started) through the
// runtime's CLI, which took 1.5 s a container with podman on an idle
// machine; beside the rest of the suite in CI, one stop took over 15 s.
func stopWithin() time.Duration {
	if ContainerRuntime() != "" {
		return 45 * time.Second
	}
	return 15 * time.Second
}

// WaitHTTP waits until url answers, for up to 30 seconds. codeexec binds
// its port before it starts its services, so a request may be accepted
// and then wait for them: each request waits at most 5 s, and another is
// sent on a new connection after it. (Once in CI a request accepted
// during the start got no answer at all, while codeexec had served for
// 24 s; what the sockets of the port were then is logged, should it
// happen again.)
func WaitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		wait := min(max(time.Until(deadline), 100*time.Millisecond), 5*time.Second)
		client := &http.Client{Timeout: wait, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err) {
			t.Logf("%s gave no answer in %s (%v); the port's sockets:\n%s", url, wait, err, portSockets(url))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come up: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// portSockets lists the TCP sockets of url's port and their processes
// (ss), for a test's log.
func portSockets(url string) string {
	u, err := neturl.Parse(url)
	if err != nil {
		return err.Error()
	}
	port := u.Port()
	out, err := exec.Command("ss", "-tanp", "( sport = :"+port+" or dport = :"+port+" )").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("ss: %v %s", err, out)
	}
	return string(out)
}

// HTTPClient is an initialised MCP client of the server at base, over
// streamable HTTP, closed when the test ends.
func HTTPClient(t *testing.T, base string) *client.Client {
	t.Helper()
	return HTTPClientWith(t, base, nil)
}

// HTTPClientWith is HTTPClient sending headers (a bearer token, say) on
// every request.
func HTTPClientWith(t *testing.T, base string, headers map[string]string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(base+"/mcp", transport.WithHTTPHeaders(headers))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	Initialize(t, c)
	return c
}

// StartHTTP starts `codeexec serve --http` on a free address with the
// extra environment, waits for it, and returns its base URL.
func StartHTTP(t *testing.T, extra map[string]string) string {
	t.Helper()
	addr := FreeAddr(t)
	StartProcess(t, BaseEnv(t, extra), "serve", "--http", addr)
	base := "http://" + addr
	WaitHTTP(t, base+"/healthz")
	return base
}

// Metric reads one sample from /metrics; absent counts as 0.
func Metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// TokensFile writes a tokens file granting each token its tenant.
func TokensFile(t *testing.T, tokens map[string]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# tenants of the end-to-end tests\n")
	for tok, tenant := range tokens {
		fmt.Fprintf(&b, "%s %s\n", gateway.HashToken(tok), tenant)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// StartAuthHTTP starts `codeexec serve --http` with args and waits for it.
func StartAuthHTTP(t *testing.T, extra map[string]string, args ...string) string {
	t.Helper()
	addr := FreeAddr(t)
	StartProcess(t, BaseEnv(t, extra), append([]string{"serve", "--http", addr}, args...)...)
	base := "http://" + addr
	WaitHTTP(t, base+"/healthz")
	return base
}

// StateEnv pins HOME and the state dir so that two processes share them.
func StateEnv(home string) map[string]string {
	return map[string]string{"HOME": home, "MCP_BRIDGE_STATE_DIR": filepath.Join(home, "MCPs")}
}

// WaitHealth waits until `codeexec health` (with tlsArgs) says the service
// at addr is serving.
func WaitHealth(t *testing.T, addr string, tlsArgs ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command(Binary, append(append([]string{"health"}, tlsArgs...), addr)...).CombinedOutput()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became healthy: %s", addr, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ResultText joins the text blocks of an MCP tool result.
func ResultText(res map[string]any) string {
	var parts []string
	blocks, _ := res["content"].([]any)
	for _, b := range blocks {
		if m, ok := b.(map[string]any); ok {
			s, _ := m["text"].(string)
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n")
}

// RawStdio is `codeexec serve` on stdio, for tests that write and read the
// protocol's lines themselves.
type RawStdio struct {
	Cmd   *exec.Cmd
	Stdin io.WriteCloser
	// Lines reads stdout, one message (up to 16 MiB) a line.
	Lines *bufio.Scanner
	// Logs is stderr.
	Logs *LockedBuffer
}

// StartRawStdio starts `codeexec serve` with env, its stdin and stdout
// piped to the test. The caller closes Stdin and waits for Cmd.
func StartRawStdio(t *testing.T, env []string) RawStdio {
	t.Helper()
	s := RawStdio{Cmd: exec.Command(Binary, "serve"), Logs: &LockedBuffer{}}
	s.Cmd.Env = env
	s.Cmd.Stderr = s.Logs
	stdin, err := s.Cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := s.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Stdin, s.Lines = stdin, bufio.NewScanner(stdout)
	s.Lines.Buffer(nil, 16<<20)
	return s
}
