package durable

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/grpctls/grpctlstest"
)

// End-to-end tests of the services run as separate processes over gRPC:
// plain, with mutual TLS, and sandboxd draining on SIGTERM.

// The services run as separate processes over gRPC, as the README shows.
func TestE2ESplitServices(t *testing.T) {
	t.Parallel()
	env := harness.BaseEnv(t, nil)
	dir := t.TempDir()
	memSock := "unix:" + dir + "/memoryd.sock"
	sbAddr, sbMetrics, gwAddr := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	harness.StartProcess(t, env, "memoryd", "--listen", memSock, "--db", dir+"/codeexec.db", "--metrics", "")
	harness.WaitHealth(t, memSock)
	harness.StartProcess(t, env, "sandboxd", "--listen", sbAddr, "--memory-addr", memSock, "--metrics", sbMetrics, "--pool", "1")
	harness.WaitHealth(t, sbAddr)
	harness.StartProcess(t, env, "gateway", "--sandbox", sbAddr, "--http", gwAddr)
	base := "http://" + gwAddr
	harness.WaitHTTP(t, base+"/healthz")

	c := harness.HTTPClient(t, base)
	harness.Code(t, c, "n = 20")
	if got := harness.Joined(harness.Code(t, c, "print(n + 22)").Stdout()); got != "42" {
		t.Fatalf("split services: stdout = %q", got)
	}
	if got := harness.Metric(t, "http://"+sbMetrics, `codeexec_sandbox_exec_seconds_count{status="ok"}`); got != 2 {
		t.Fatalf("sandboxd counted %v ok execs, want 2", got)
	}
	// Server reflection lists the service, as grpcurl needs.
	conn, err := grpc.NewClient(sbAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	refl, err := rc.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var services []string
	for _, s := range refl.GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	if !slices.Contains(services, "codeexec.sandbox.v1.SandboxService") || !slices.Contains(services, "grpc.health.v1.Health") {
		t.Fatalf("reflection lists %v", services)
	}
	out, err := exec.Command(harness.Binary, "health", sbAddr).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "SERVING" {
		t.Fatalf("codeexec health %s: %s, %v", sbAddr, out, err)
	}
}

// TestE2ESplitServicesMutualTLS runs memoryd, sandboxd and the gateway as
// separate processes over TCP with mutual TLS, each with its own
// certificate: a call that uses memory crosses both links, and the health
// check answers only a client whose certificate the services' CA signed.
func TestE2ESplitServicesMutualTLS(t *testing.T) {
	t.Parallel()
	env := harness.BaseEnv(t, nil)
	dir := t.TempDir()
	ca := grpctlstest.NewCA(t, "codeexec")
	memAddr, sbAddr, gwAddr := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	harness.StartProcess(t, env, append([]string{"memoryd", "--listen", memAddr, "--db", dir + "/codeexec.db", "--metrics", ""}, grpctlstest.Args(ca.Issue(t, "memoryd"))...)...)
	probe := grpctlstest.Args(ca.Issue(t, "probe"))
	harness.WaitHealth(t, memAddr, probe...)
	harness.StartProcess(t, env, append([]string{"sandboxd", "--listen", sbAddr, "--memory-addr", memAddr, "--metrics", "", "--pool", "1"}, grpctlstest.Args(ca.Issue(t, "sandboxd"))...)...)
	harness.WaitHealth(t, sbAddr, probe...)
	harness.StartProcess(t, env, append([]string{"gateway", "--sandbox", sbAddr, "--http", gwAddr}, grpctlstest.Args(ca.Issue(t, "gateway"))...)...)
	base := "http://" + gwAddr
	harness.WaitHTTP(t, base+"/healthz")

	c := harness.HTTPClient(t, base)
	harness.Code(t, c, `save_memory("over-tls", {"ok": True})`)
	if got := harness.Joined(harness.Code(t, c, `print(load_memory("over-tls"))`).Stdout()); got != "{'ok': True}" {
		t.Fatalf("memory through gateway → sandboxd → memoryd over mutual TLS: %q", got)
	}

	rogue := grpctlstest.Args(grpctlstest.NewCA(t, "rogue").Issue(t, "intruder"))
	for name, args := range map[string][]string{"plaintext": nil, "a certificate from another CA": rogue} {
		out, err := exec.Command(harness.Binary, append(append([]string{"health"}, args...), sbAddr)...).CombinedOutput()
		if err == nil {
			t.Errorf("health check of sandboxd with %s succeeded: %s", name, out)
		}
	}
	out, err := exec.Command(harness.Binary, append(append([]string{"health"}, probe...), memAddr)...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "SERVING" {
		t.Errorf("health check of memoryd with the CA's certificate: %s, %v", out, err)
	}
	out, err = exec.Command(harness.Binary, "health", "--grpc-tls-cert", probe[1], memAddr).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "missing --grpc-tls-key, --grpc-tls-ca") {
		t.Errorf("health check with a certificate but no key or CA: %s, %v", out, err)
	}
}

// SIGTERM to a split sandboxd lets a running execution finish.
func TestE2ESplitSandboxdDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	addr := harness.FreeAddr(t)
	cmd := exec.Command(harness.Binary, "sandboxd", "--listen", addr, "--metrics", "", "--pool", "0", "--shutdown-grace", "60s")
	cmd.Env = harness.BaseEnv(t, nil)
	logs := &harness.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("sandboxd output:\n%s", harness.TailOf(logs.String(), 4000))
		}
	})
	harness.WaitHealth(t, addr)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := sandboxv1.NewSandboxServiceClient(conn)
	s, err := c.CreateSession(t.Context(), &sandboxv1.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := c.Execute(t.Context(), &sandboxv1.ExecuteRequest{SessionId: s.GetSession().GetId(), Code: "import time\nprint('start', flush=True)\ntime.sleep(2)\nprint('finished')"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetOutput().GetText() != "start\n" {
		t.Fatalf("first event = %v, %v", first, err)
	}
	if err := cmd.Process.Signal(harness.InterruptSignal); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("the running execution was cut off by SIGTERM: %v (output so far %q)", err, out.String())
		}
		out.WriteString(ev.GetOutput().GetText())
		if r := ev.GetResult(); r != nil {
			if r.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK || out.String() != "finished\n" {
				t.Fatalf("result %v, output %q", r, out.String())
			}
			break
		}
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("sandboxd exited with %v after draining", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("sandboxd did not exit after draining")
	}
}
