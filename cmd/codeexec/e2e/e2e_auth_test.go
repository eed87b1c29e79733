package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/gateway"
)

// tokensFile writes a tokens file granting each token its tenant.
func tokensFile(t *testing.T, tokens map[string]string) string {
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

// startAuthHTTP starts `codeexec serve --http` with args and waits for it.
func startAuthHTTP(t *testing.T, extra map[string]string, args ...string) string {
	t.Helper()
	addr := freeAddr(t)
	startProcess(t, baseEnv(t, extra), append([]string{"serve", "--http", addr}, args...)...)
	base := "http://" + addr
	waitHTTP(t, base+"/healthz")
	return base
}

// tokenClient is an initialised HTTP MCP client sending a bearer token.
func tokenClient(t *testing.T, base, token string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	initialize(t, c)
	return c
}

// rawInitialize posts an initialize request with the given headers.
// reply is an HTTP response whose body was read and closed.
type reply struct {
	StatusCode int
	Header     http.Header
}

func rawInitialize(t *testing.T, base string, header map[string]string) (reply, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{StatusCode: resp.StatusCode, Header: resp.Header}, string(b)
}

// jwksIssuer is an OAuth issuer for the tests: an RSA key served as a JWKS.
type jwksIssuer struct {
	url string
	key *rsa.PrivateKey
}

func newJWKSIssuer(t *testing.T) jwksIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
			"n": enc(key.N.Bytes()), "e": enc(big.NewInt(int64(key.E)).Bytes()),
		}}})
	}))
	t.Cleanup(srv.Close)
	return jwksIssuer{url: srv.URL, key: key}
}

// token is a JWT for carol.
func (is jwksIssuer) token(t *testing.T, aud string, exp time.Time) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": is.url, "aud": aud, "sub": "carol", "exp": exp.Unix(), "iat": time.Now().Add(-2 * time.Hour).Unix(),
	})
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(is.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestE2EAuthRejectsMissingWrongAndExpiredTokens(t *testing.T) {
	t.Parallel()
	is := newJWKSIssuer(t)
	addr := freeAddr(t)
	base := "http://" + addr
	startProcess(t, baseEnv(t, map[string]string{"CODEEXEC_TOKENS_FILE": tokensFile(t, map[string]string{"alpha-token": "alpha"})}),
		"serve", "--http", addr, "--jwt-issuer", is.url, "--jwks-url", is.url, "--jwt-audience", base+"/mcp")
	waitHTTP(t, base+"/healthz")

	metadata := base + "/.well-known/oauth-protected-resource/mcp"
	for _, tc := range []struct {
		name  string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "beta-token", http.StatusUnauthorized},
		{"expired JWT", is.token(t, base+"/mcp", time.Now().Add(-time.Minute)), http.StatusUnauthorized},
		{"JWT for another audience", is.token(t, "https://elsewhere/mcp", time.Now().Add(time.Hour)), http.StatusUnauthorized},
		{"static token", "alpha-token", http.StatusOK},
		{"valid JWT", is.token(t, base+"/mcp", time.Now().Add(time.Hour)), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.token != "" {
				h["Authorization"] = "Bearer " + tc.token
			}
			resp, body := rawInitialize(t, base, h)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, body)
			}
			if tc.want == http.StatusUnauthorized {
				if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer ") || !strings.Contains(got, `resource_metadata="`+metadata+`"`) {
					t.Errorf("WWW-Authenticate = %q; want Bearer with resource_metadata %s", got, metadata)
				}
				if strings.Contains(body, "alpha") || strings.Contains(body, "carol") {
					t.Errorf("the 401 names a tenant: %s", body)
				}
			}
		})
	}
	// The metadata names the issuer, and a JWT's subject is its tenant.
	resp, err := http.Get(metadata)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if doc["resource"] != base+"/mcp" || fmt.Sprint(doc["authorization_servers"]) != "["+is.url+"]" {
		t.Errorf("protected-resource metadata = %v", doc)
	}
	c := tokenClient(t, base, is.token(t, base+"/mcp", time.Now().Add(time.Hour)))
	if got := joined(code(t, c, "print(6 * 7)").stdout()); got != "42" {
		t.Errorf("a call with a valid JWT printed %q", got)
	}
}

func TestE2EAuthAddressRules(t *testing.T) {
	t.Parallel()
	// A public address without authentication is refused, and says why.
	cmd := exec.Command(binary, "serve", "--http", "0.0.0.0:0")
	cmd.Env = baseEnv(t, nil)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refusing to serve MCP over HTTP on 0.0.0.0:0 without authentication") ||
		!strings.Contains(string(out), "--insecure-no-auth") {
		t.Fatalf("serve --http 0.0.0.0:0 without auth: %v\n%s", err, out)
	}
	// A bare port binds loopback only.
	port := strings.TrimPrefix(freeAddr(t), "127.0.0.1")
	logs := startProcess(t, baseEnv(t, nil), "serve", "--http", port)
	waitHTTP(t, "http://127.0.0.1"+port+"/healthz")
	if !strings.Contains(logs.String(), "http://127.0.0.1"+port+"/mcp") {
		t.Errorf("--http %s did not bind 127.0.0.1:\n%s", port, logs.String())
	}
	// With no authentication, a rebound Host or a foreign Origin is refused.
	for _, h := range []map[string]string{{"Origin": "http://evil.example"}} {
		if resp, body := rawInitialize(t, "http://127.0.0.1"+port, h); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%v: status %d, want 403: %s", h, resp.StatusCode, body)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1"+port+"/mcp", strings.NewReader("{}"))
	req.Host = "evil.example" + port
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("rebound Host: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("rebound Host: status %d, want 403", resp.StatusCode)
	}
}

func TestE2ETenantsStayApart(t *testing.T) {
	t.Parallel()
	base := startAuthHTTP(t, map[string]string{"CODEEXEC_TOKENS_FILE": tokensFile(t, map[string]string{"alpha-token": "alpha", "beta-token": "beta"})})
	a, b := tokenClient(t, base, "alpha-token"), tokenClient(t, base, "beta-token")
	code(t, a, `
save_memory("plan", "alpha's plan")
def shout(s):
    """Alpha's tool."""
    return s.upper()
save_tool(shout)
secret = 7`)
	o := code(t, b, `
import user_tools
print(load_memory("plan", default="none"), hasattr(user_tools, "shout"), "secret" in globals())`)
	if got := joined(o.stdout()); got != "none False False" {
		t.Errorf("tenant beta sees %q; want none of alpha's memory, tools or variables", got)
	}
	code(t, b, `save_memory("plan", "beta's plan")`)
	// A second client of alpha shares alpha's memory and tools.
	a2 := tokenClient(t, base, "alpha-token")
	if got := joined(code(t, a2, "import user_tools\nprint(load_memory('plan'), user_tools.shout('hi'))").stdout()); got != "alpha's plan HI" {
		t.Errorf("alpha's second session sees %q", got)
	}
	// Beta presenting alpha's MCP session ID is told it does not exist.
	resp, body := rawInitialize(t, base, map[string]string{"Authorization": "Bearer beta-token", "Mcp-Session-Id": a.GetSessionId()})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("beta with alpha's session ID: status %d, want 404: %s", resp.StatusCode, body)
	}
	if got := joined(code(t, a, "print(secret)").stdout()); got != "7" {
		t.Errorf("alpha's session lost its state: %q", got)
	}
}

func TestE2EQuotaHitThenRecovers(t *testing.T) {
	t.Parallel()
	base := startAuthHTTP(t, map[string]string{"CODEEXEC_TOKENS_FILE": tokensFile(t, map[string]string{"alpha-token": "alpha", "beta-token": "beta"})},
		"--quota-execs", "1")
	long, other, beta := tokenClient(t, base, "alpha-token"), tokenClient(t, base, "alpha-token"), tokenClient(t, base, "beta-token")
	code(t, other, "pass") // start the second session's sandbox first
	// The long call runs a sleep whose argument marks it, so the test
	// knows when the call holds the tenant's only execution slot.
	marker := fmt.Sprintf("3.%06d", time.Now().UnixNano()%1000000)
	var wg sync.WaitGroup
	wg.Go(func() {
		// The warm-up call's slot may be released a moment after its
		// result arrives; until then this call is refused too.
		for {
			o := runPython(t, long, map[string]any{"code": fmt.Sprintf("import subprocess\nsubprocess.run(['sleep', '%s'])\nprint('done')", marker)})
			if o.IsError && strings.Contains(o.Text, "concurrent executions") {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if o.IsError {
				t.Errorf("the long call failed: %s", o.Text)
			}
			return
		}
	})
	for deadline := time.Now().Add(60 * time.Second); len(processesWithArg(marker)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the long call never started")
		}
	}
	refused := runPython(t, other, map[string]any{"code": "pass"})
	if !refused.IsError || !strings.Contains(refused.Text, "limit of 1 concurrent executions") || !strings.Contains(refused.Text, "retry when") {
		t.Fatalf("while alpha's long call ran, another alpha call gave %q; want the concurrent-executions quota and when to retry", refused.Text)
	}
	// Beta has its own quota.
	code(t, beta, "pass")
	wg.Wait()
	code(t, other, "print('recovered')")
}

func TestE2EProgressArrivesBeforeResult(t *testing.T) {
	t.Parallel()
	base := startAuthHTTP(t, map[string]string{"CODEEXEC_TOKENS_FILE": tokensFile(t, map[string]string{"alpha-token": "alpha"})})
	c := tokenClient(t, base, "alpha-token")
	var mu sync.Mutex
	var messages []string
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" && n.Params.AdditionalFields["progressToken"] == "p-1" {
			mu.Lock()
			messages = append(messages, fmt.Sprint(n.Params.AdditionalFields["message"]))
			mu.Unlock()
		}
	})
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = map[string]any{"code": "import time\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(0.6)"}
	req.Params.Meta = &mcp.Meta{ProgressToken: "p-1"}
	res, err := c.CallTool(context.Background(), req)
	mu.Lock()
	before := append([]string(nil), messages...)
	mu.Unlock()
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if len(before) == 0 || before[0] != "tick 0" {
		t.Fatalf("progress notifications received before the result: %q; want the first to be %q", before, "tick 0")
	}
	// The final result is unchanged by streaming.
	text := res.Content[0].(mcp.TextContent).Text
	if !strings.Contains(text, "tick 0\ntick 1\ntick 2") {
		t.Errorf("result text %q lacks the whole output", text)
	}
}

// memoryUpstream writes an MCP_SERVERS_CONFIG with the npm memory server,
// whose process carries mark in its environment.
func memoryUpstream(t *testing.T, mark string) string {
	t.Helper()
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	cfg := map[string]any{"mcpServers": map[string]any{"memory": map[string]any{
		"command": node, "args": []any{npmEntry(t, "server-memory")},
		"env": map[string]any{"CODEEXEC_TEST_MARK": mark, "MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")},
	}}}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestE2EShutdownLetsRunningExecFinish(t *testing.T) {
	t.Parallel()
	mark := "e2e-shutdown-" + strings.ReplaceAll(t.TempDir(), "/", "_")
	sleepMark := fmt.Sprintf("%d.%03d", time.Now().UnixNano()%100000, 11)
	addr := freeAddr(t)
	base := "http://" + addr
	logs := &lockedBuffer{}
	cmd := exec.Command(binary, "serve", "--http", addr, "--shutdown-grace", "60s")
	cmd.Env = baseEnv(t, map[string]string{
		"CODEEXEC_TOKENS_FILE": tokensFile(t, map[string]string{"alpha-token": "alpha"}),
		"MCP_SERVERS_CONFIG":   memoryUpstream(t, mark),
	})
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("codeexec output:\n%s", tailOf(logs.String(), 8000))
		}
	})
	waitHTTP(t, base+"/healthz")
	c, late := tokenClient(t, base, "alpha-token"), tokenClient(t, base, "alpha-token")
	// The upstream server runs, and so does a detached sandbox child.
	o := runPython(t, c, map[string]any{"code": "print(await mcp_memory.read_graph())", "servers": []any{"memory"}})
	if o.IsError || len(markedProcesses(mark)) == 0 {
		t.Fatalf("the memory server is not running (%s), so the orphan check proves nothing", o.Text)
	}
	code(t, late, "pass")

	result := make(chan outcome, 1)
	go func() {
		result <- runPython(t, c, map[string]any{"code": fmt.Sprintf(`
import subprocess, time
subprocess.Popen(["sleep", "%s"], start_new_session=True)
time.sleep(3)
print("finished")`, sleepMark)})
	}()
	for len(processesWithArg(sleepMark)) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(interruptSignal); err != nil {
		t.Fatal(err)
	}
	// New calls are refused while the running one finishes. A call may
	// still get in before the signal is handled; the next ones may not.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		o := runPython(t, late, map[string]any{"code": "print('late')"})
		if o.IsError {
			if !strings.Contains(o.Text, "shutting down") {
				t.Errorf("a call after SIGTERM = %q; want a shutting-down tool error", o.Text)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("calls are still accepted long after SIGTERM")
		}
	}
	if o := <-result; o.IsError || joined(o.stdout()) != "finished" {
		t.Fatalf("the exec running at SIGTERM ended with %q; want it to finish", o.Text)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("codeexec exited with %v after SIGTERM; want 0", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("codeexec did not exit after SIGTERM and the last call ended")
	}
	if pids := processesWithArg(sleepMark); len(pids) != 0 {
		t.Errorf("sandbox processes %v outlived the server", pids)
	}
	if procs := markedProcesses(mark); len(procs) != 0 {
		t.Errorf("upstream servers %v outlived the server", procs)
	}
}

func TestE2ETenantScopedUpstream(t *testing.T) {
	t.Parallel()
	cfgPath := memoryUpstream(t, "e2e-scoped-"+strings.ReplaceAll(t.TempDir(), "/", "_"))
	raw, _ := os.ReadFile(cfgPath)
	var cfg map[string]map[string]map[string]any
	_ = json.Unmarshal(raw, &cfg)
	cfg["mcpServers"]["memory"]["tenants"] = []any{"alpha"}
	raw, _ = json.Marshal(cfg)
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	base := startAuthHTTP(t, map[string]string{
		"CODEEXEC_TOKENS_FILE": tokensFile(t, map[string]string{"alpha-token": "alpha", "beta-token": "beta"}),
		"MCP_SERVERS_CONFIG":   cfgPath,
	})
	a, b := tokenClient(t, base, "alpha-token"), tokenClient(t, base, "beta-token")
	if o := runPython(t, a, map[string]any{"code": "print(await mcp_memory.read_graph())", "servers": []any{"memory"}}); o.IsError {
		t.Fatalf("alpha cannot use its server: %s", o.Text)
	}
	o := runPython(t, b, map[string]any{"code": "pass", "servers": []any{"memory"}})
	if !o.IsError || !strings.Contains(o.Text, `unknown MCP server "memory"`) {
		t.Errorf("beta asking for alpha's server got %q; want it unknown", o.Text)
	}
	o = code(t, b, "print(runtime.discovered_servers(), await runtime.search_tool_docs('read graph'))")
	if strings.Contains(joined(o.stdout()), "memory") {
		t.Errorf("beta discovers alpha's server: %q", joined(o.stdout()))
	}
}

func TestE2EAuthTokensFileReloads(t *testing.T) {
	t.Parallel()
	path := tokensFile(t, map[string]string{"alpha-token": "alpha"})
	base := startAuthHTTP(t, map[string]string{"CODEEXEC_TOKENS_FILE": path})
	status := func(token string) int {
		resp, _ := rawInitialize(t, base, map[string]string{"Authorization": "Bearer " + token})
		return resp.StatusCode
	}
	if status("alpha-token") != http.StatusOK || status("gamma-token") != http.StatusUnauthorized {
		t.Fatal("before the edit: want alpha accepted and gamma refused")
	}
	// Replace the file, as an operator rotating tokens would.
	fresh := tokensFile(t, map[string]string{"gamma-token": "gamma"})
	if err := os.Rename(fresh, path); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); status("gamma-token") != http.StatusOK; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the new token is still refused after the tokens file changed")
		}
	}
	if got := status("alpha-token"); got != http.StatusUnauthorized {
		t.Errorf("the removed token gets %d, want 401", got)
	}
}
