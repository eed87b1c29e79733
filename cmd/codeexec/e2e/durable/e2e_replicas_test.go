package durable

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// The gateway spreads sessions over three sandboxd replicas, pins each to
// its replica, and when one replica dies its sessions (durable: sandboxd
// keeps their checkpoints in memoryd) are restored on another, once its
// lease lapses, while the others keep running where they are.
func TestE2EGatewayOverReplicas(t *testing.T) {
	t.Parallel()
	env := harness.BaseEnv(t, nil)
	dir := t.TempDir()
	memSock := "unix:" + dir + "/memoryd.sock"
	harness.StartProcess(t, env, "memoryd", "--listen", memSock, "--db", dir+"/codeexec.db", "--metrics", "")
	harness.WaitHealth(t, memSock)
	addrs := make([]string, 3)
	procs := make([]*exec.Cmd, 3)
	for i := range addrs {
		addrs[i] = harness.FreeAddr(t)
		procs[i], _ = harness.StartCommand(t, env, "sandboxd", "--listen", addrs[i], "--memory-addr", memSock, "--metrics", "", "--pool", "1")
	}
	for _, a := range addrs {
		harness.WaitHealth(t, a)
	}
	gwAddr := harness.FreeAddr(t)
	gwLogs := harness.StartProcess(t, env, "gateway", "--sandbox", strings.Join(addrs, ","), "--http", gwAddr)
	base := "http://" + gwAddr
	harness.WaitHTTP(t, base+"/healthz")
	// The compose health check of the gateway.
	if out, err := exec.Command(harness.Binary, "health", base+"/healthz").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "SERVING" {
		t.Fatalf("codeexec health %s/healthz: %s, %v", base, out, err)
	}
	if out, err := exec.Command(harness.Binary, "health", "http://"+harness.FreeAddr(t)+"/healthz").CombinedOutput(); err == nil {
		t.Fatalf("codeexec health of a closed port succeeded: %s", out)
	}

	const n = 6
	clients := make([]harness.MCPClient, n)
	for i := range clients {
		clients[i] = harness.HTTPClient(t, base)
		harness.Code(t, clients[i], fmt.Sprintf("x = %d", i))
	}
	perReplica := make([]int, len(addrs))
	for i, a := range addrs {
		perReplica[i] = len(listSessions(t, a))
	}
	for _, c := range perReplica {
		if c != n/len(addrs) {
			t.Fatalf("sessions per replica = %v, want %d each (least loaded)", perReplica, n/len(addrs))
		}
	}

	// A checkpoint is taken after its call's result, and stored by the
	// time the next call runs: one more call makes every x durable.
	for i, c := range clients {
		if got := harness.Joined(harness.Code(t, c, "print(x)").Stdout()); got != fmt.Sprint(i) {
			t.Fatalf("client %d before the kill: %q", i, got)
		}
	}
	// Kill replica 1 outright: no graceful shutdown, its sessions vanish.
	_ = procs[1].Process.Kill()
	_ = procs[1].Wait()
	restored := 0
	for i, c := range clients {
		o := harness.RunPython(t, c, map[string]any{"code": "print(x)"})
		if o.IsError || harness.Joined(o.Stdout()) != fmt.Sprint(i) {
			t.Fatalf("client %d after a replica died: %s", i, o.Text)
		}
		if strings.Contains(o.Text, "restored the session") {
			restored++
		}
	}
	if restored != perReplica[1] {
		t.Fatalf("%d sessions were restored, want the %d that were on the killed replica", restored, perReplica[1])
	}
	if logs := gwLogs.String(); !strings.Contains(logs, "sandboxd replica went away") || !strings.Contains(logs, addrs[1]) {
		t.Errorf("the gateway did not log why the sessions were lost:\n%s", harness.TailOf(gwLogs.String(), 3000))
	}
	survivors := len(listSessions(t, addrs[0])) + len(listSessions(t, addrs[2]))
	if survivors != n {
		t.Fatalf("the two healthy replicas hold %d sessions, want all %d", survivors, n)
	}
}

func listSessions(t *testing.T, addr string) []*sandboxv1.Session {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := sandboxv1.NewSandboxServiceClient(conn).ListSessions(t.Context(), &sandboxv1.ListSessionsRequest{})
	if err != nil {
		t.Fatalf("ListSessions on %s: %v", addr, err)
	}
	return resp.GetSessions()
}
