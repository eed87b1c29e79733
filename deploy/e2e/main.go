// Command e2e drives the compose stack of deploy/docker-compose.yml with a
// real MCP client over streamable HTTP, as deploy/e2e.sh runs it:
//
//	go run ./deploy/e2e -mode throughput -label 1   # calls per second
//	go run ./deploy/e2e -mode replicas              # spread, pinning, a killed replica
//	go run ./deploy/e2e -mode store                 # memoryd replicas on PostgreSQL
//
// It finds the sandboxd replicas through the engine (compose labels) and
// asks each one for its sessions over gRPC, to see where sessions landed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

var (
	gatewayURL  = flag.String("gateway", "http://127.0.0.1:8080/mcp", "the gateway's MCP endpoint")
	engine      = flag.String("engine", "docker", "container engine CLI")
	project     = flag.String("project", "codeexec", "compose project name")
	mode        = flag.String("mode", "replicas", "replicas, throughput, recall, limits, store or kube")
	sessions    = flag.Int("sessions", 6, "MCP sessions for -mode replicas")
	concurrency = flag.Int("concurrency", 8, "concurrent MCP sessions for -mode throughput")
	duration    = flag.Duration("duration", 10*time.Second, "how long -mode throughput runs")
	label       = flag.String("label", "", "a label for the throughput line, e.g. the replica count")
	token       = flag.String("token", "", "bearer token for the gateway (-mode kube)")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: FAIL:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	switch *mode {
	case "replicas":
		err = replicas(ctx)
	case "throughput":
		err = throughput(ctx)
	case "recall":
		err = inSession(ctx, recall)
	case "limits":
		err = inSession(ctx, limits)
	case "store":
		err = storeMode(ctx)
	case "kube":
		err = kube(ctx)
	default:
		err = fmt.Errorf("mode %q: want replicas, throughput, recall, limits, store or kube", *mode)
	}
	return err
}

// wrong says what went wrong with a step whose output was not the one
// expected: the call's error, or else the output.
func wrong(step, out string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", step, err)
	}
	return fmt.Errorf("%s: got %q", step, out)
}

// session is one MCP client session.
type session struct {
	c *client.Client
}

func open(ctx context.Context) (*session, error) { return openAt(ctx, *gatewayURL) }

// openAt opens a session on the gateway at url, with -token if set.
func openAt(ctx context.Context, url string) (*session, error) {
	var opts []transport.StreamableHTTPCOption
	if *token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + *token}))
	}
	c, err := client.NewStreamableHttpClient(url, opts...)
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION // a session-based client
	req.Params.ClientInfo = mcp.Implementation{Name: "codeexec-deploy-e2e", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return &session{c: c}, nil
}

// run calls run_python and returns its text, stdout and whether it failed.
func (s *session) run(ctx context.Context, code string, servers ...string) (text, stdout string, isErr bool, err error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = map[string]any{"code": code}
	if len(servers) > 0 {
		req.Params.Arguments = map[string]any{"code": code, "servers": servers}
	}
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return "", "", false, err
	}
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text += tc.Text
		}
	}
	var sc struct {
		Stdout []string `json:"stdout"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &sc)
	return text, strings.Join(sc.Stdout, "\n"), res.IsError, nil
}

func (s *session) must(ctx context.Context, code string) (string, error) {
	text, out, isErr, err := s.run(ctx, code)
	if err != nil {
		return "", err
	}
	if isErr {
		return "", fmt.Errorf("run_python(%q) failed: %s", code, text)
	}
	return out, nil
}

// replica is one sandboxd container.
type replica struct{ name, addr string }

func findReplicas(ctx context.Context) ([]replica, error) {
	return findService(ctx, "sandboxd", "9002")
}

// findService lists the running containers of a compose service, with
// their addresses on port.
func findService(ctx context.Context, service, port string) ([]replica, error) {
	out, err := exec.CommandContext(ctx, *engine, "ps", "-q",
		"--filter", "label=com.docker.compose.project="+*project,
		"--filter", "label=com.docker.compose.service="+service).Output()
	if err != nil {
		return nil, fmt.Errorf("list %s replicas: %w", service, err)
	}
	ids := strings.Fields(string(out))
	if len(ids) == 0 {
		return nil, fmt.Errorf("no %s replica is running", service)
	}
	out, err = exec.CommandContext(ctx, *engine, append([]string{"inspect", "--format",
		"{{.Name}} {{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"}, ids...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("inspect %s replicas: %w", service, err)
	}
	var rs []replica
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("replica without an address: %q", line)
		}
		rs = append(rs, replica{name: strings.TrimPrefix(f[0], "/"), addr: f[1] + ":" + port})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].name < rs[j].name })
	return rs, nil
}

// sessionsOn lists the MCP sessions whose sandbox sessions live on r.
func sessionsOn(ctx context.Context, r replica) ([]string, error) {
	conn, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	resp, err := sandboxv1.NewSandboxServiceClient(conn).ListSessions(ctx, &sandboxv1.ListSessionsRequest{})
	if err != nil {
		return nil, fmt.Errorf("ListSessions on %s (%s): %w", r.name, r.addr, err)
	}
	var ids []string
	for _, s := range resp.GetSessions() {
		ids = append(ids, s.GetId())
	}
	return ids, nil
}

func replicas(ctx context.Context) error {
	rs, err := findReplicas(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("replicas: %d\n", len(rs))
	clients := make([]*session, *sessions)
	for i := range clients {
		if clients[i], err = open(ctx); err != nil {
			return err
		}
		defer clients[i].c.Close()
		// The workspace is part of the session too: its file moves with it.
		if _, err := clients[i].must(ctx, fmt.Sprintf("x = %d\nopen('/workspace/keep.txt', 'w').write(str(x));", i)); err != nil {
			return err
		}
	}
	counts := make([]int, len(rs))
	for i, r := range rs {
		ids, err := sessionsOn(ctx, r)
		if err != nil {
			return err
		}
		counts[i] = len(ids)
		fmt.Printf("  %s (%s): %d sessions\n", r.name, r.addr, counts[i])
	}
	used := 0
	for _, c := range counts {
		if c > 0 {
			used++
		}
	}
	if used < min(len(rs), *sessions) {
		return fmt.Errorf("%d sessions landed on %d of %d replicas: %v", *sessions, used, len(rs), counts)
	}
	// Memory is shared through memoryd whichever replica a session is on.
	if _, err := clients[0].must(ctx, "save_memory('e2e', {'from': 0})\ndef e2e_tool(v):\n    return v * 2\nsave_tool(e2e_tool)"); err != nil {
		return err
	}
	if out, err := clients[len(clients)-1].must(ctx, "print(load_memory('e2e')['from'])"); err != nil || out != "0" {
		return wrong("memory across replicas", out, err)
	}

	// A checkpoint is stored by the time the next call of its session runs:
	// one more call each makes every x durable before the kill.
	for i, c := range clients {
		if out, err := c.must(ctx, "print(x)"); err != nil || out != fmt.Sprint(i) {
			return wrong(fmt.Sprintf("client %d before the kill", i), out, err)
		}
	}
	// Kill the busiest replica outright.
	victim := slices.Index(counts, slices.Max(counts))
	fmt.Printf("killing %s with %d sessions\n", rs[victim].name, counts[victim])
	if out, err := exec.CommandContext(ctx, *engine, "kill", rs[victim].name).CombinedOutput(); err != nil {
		return fmt.Errorf("kill %s: %w: %s", rs[victim].name, err, out)
	}
	// Sessions are durable (sandboxd keeps their checkpoints in memoryd):
	// every one keeps its state, those of the killed replica restored on
	// another once its lease lapses.
	restored, err := afterKill(ctx, clients)
	if err != nil {
		return err
	}
	fmt.Printf("after the kill: every session kept its state and its workspace file; %d were restored from their checkpoints on another replica\n", restored)
	if restored != counts[victim] {
		return fmt.Errorf("%d sessions were restored, want the %d that were on %s", restored, counts[victim], rs[victim].name)
	}
	fmt.Println("e2e: replicas: PASS")
	return nil
}

// afterKill checks that every client kept its variable and its workspace
// file, and counts those restored on another replica.
func afterKill(ctx context.Context, clients []*session) (int, error) {
	restored := 0
	for i, s := range clients {
		text, out, isErr, err := s.run(ctx, "print(x, open('/workspace/keep.txt').read())")
		switch {
		case err != nil:
			return 0, fmt.Errorf("client %d after the kill: the gateway failed: %w", i, err)
		case !isErr && out == fmt.Sprintf("%d %d", i, i):
			if strings.Contains(text, "restored the session") {
				if !strings.Contains(text, "files /workspace/keep.txt") {
					return 0, fmt.Errorf("client %d was restored on another replica without naming its file: %s", i, text)
				}
				restored++
			}
		default:
			return 0, fmt.Errorf("client %d after the kill lost its state: %s", i, text)
		}
	}
	return restored, nil
}

func throughput(ctx context.Context) error {
	clients := make([]*session, *concurrency)
	for i := range clients {
		var err error
		if clients[i], err = open(ctx); err != nil {
			return err
		}
		defer clients[i].c.Close()
		if _, err := clients[i].must(ctx, "n = 0"); err != nil {
			return err
		}
	}
	var calls, failures atomic.Int64
	var lat sync.Mutex
	var lats []time.Duration
	deadline := time.Now().Add(*duration)
	var wg sync.WaitGroup
	for _, s := range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if _, err := s.must(ctx, "n += 1"); err != nil {
					failures.Add(1)
					continue
				}
				d := time.Since(t0)
				calls.Add(1)
				lat.Lock()
				lats = append(lats, d)
				lat.Unlock()
			}
		})
	}
	wg.Wait()
	if failures.Load() > 0 {
		return fmt.Errorf("%d calls failed", failures.Load())
	}
	slices.Sort(lats)
	p := func(q float64) time.Duration { return lats[int(q*float64(len(lats)-1))].Round(10 * time.Microsecond) }
	fmt.Printf("throughput replicas=%s concurrency=%d: %.0f calls/s (%d calls in %s), latency p50 %s p99 %s\n",
		*label, *concurrency, float64(calls.Load())/duration.Seconds(), calls.Load(), *duration, p(0.5), p(0.99))
	return nil
}

// inSession runs check in a new MCP session, closed after it.
func inSession(ctx context.Context, check func(context.Context, *session) error) error {
	s, err := open(ctx)
	if err != nil {
		return err
	}
	defer s.c.Close()
	return check(ctx, s)
}

// recall checks that the memory and the saved tool written by -mode
// replicas are still there (after the stack was recreated, say).
func recall(ctx context.Context, s *session) error {
	out, err := s.must(ctx, "import user_tools\nprint(load_memory('e2e')['from'], user_tools.e2e_tool(21))")
	if err != nil {
		return err
	}
	if out != "0 42" {
		return fmt.Errorf("memory and saved tool after recreating the stack: %q, want \"0 42\"", out)
	}
	fmt.Println("e2e: recall: PASS (memory and saved tools survived)")
	return nil
}

// The host uids container sandboxes take one each of, by default
// (sandboxd's --container-uids; container.DefaultFirstUID and
// DefaultUIDCount, which this command cannot import).
const firstSandboxUID, sandboxUIDs = 2_000_000_000, 65536

// limits checks that the sandboxes sandboxd starts as sibling containers
// keep their limits and isolation: a fork bomb and a memory bomb are
// stopped with a clear error and the session carries on, and the sandbox
// has no network and runs as a host uid of its own (named sandbox).
func limits(ctx context.Context, s *session) error {
	out, err := s.must(ctx, `
import os, pwd, socket
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2); net = "network!"
except OSError:
    net = "no network"
print(os.getuid(), pwd.getpwuid(os.getuid()).pw_name, net)`)
	uid, rest, _ := strings.Cut(out, " ")
	n, _ := strconv.Atoi(uid)
	if err != nil || rest != "sandbox no network" || n < firstSandboxUID || n >= firstSandboxUID+sandboxUIDs {
		return wrong("isolation", out, err)
	}
	for _, bomb := range []struct{ name, code, want string }{
		{"fork bomb", "import os\nwhile True:\n    os.fork()", "process limit"},
		{"memory bomb", "b = []\nwhile True:\n    b.append(bytearray(16 << 20))", "memory"},
	} {
		text, _, isErr, err := s.run(ctx, bomb.code)
		if err != nil {
			return fmt.Errorf("%s: %w", bomb.name, err)
		}
		if !isErr || !strings.Contains(text, bomb.want) {
			return fmt.Errorf("%s: isError=%v, want an error naming the %s: %s", bomb.name, isErr, bomb.want, text)
		}
		if out, err := s.must(ctx, "print('alive')"); err != nil || out != "alive" {
			return wrong("after the "+bomb.name, out, err)
		}
		fmt.Printf("%s: stopped (%s), the session carried on\n", bomb.name, firstLine(text))
	}
	fmt.Println("e2e: limits: PASS")
	return nil
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "limit") || strings.Contains(l, "memory") {
			return strings.TrimSpace(l)
		}
	}
	return strings.SplitN(s, "\n", 2)[0]
}
