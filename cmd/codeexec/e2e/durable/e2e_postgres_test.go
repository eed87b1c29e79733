package durable

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/dial"
	"github.com/codeexec/codeexec/services/pgtest"
)

// End-to-end tests of memoryd on PostgreSQL: the real binary, real
// PostgreSQL servers (services/pgtest), real sandboxes.

// memorydProc is one `codeexec memoryd` process.
type memorydProc struct {
	cmd  *exec.Cmd
	logs *harness.LockedBuffer
	mem  memoryv1.MemoryServiceClient
}

// startMemoryd runs `codeexec memoryd` on a free port with env and args,
// and waits until it serves.
func startMemoryd(t *testing.T, env map[string]string, args ...string) *memorydProc {
	t.Helper()
	addr := harness.FreeAddr(t)
	p := &memorydProc{logs: &harness.LockedBuffer{}}
	p.cmd = exec.Command(harness.Binary, append([]string{"memoryd", "--listen", addr, "--metrics", ""}, args...)...)
	p.cmd.Env = harness.BaseEnv(t, env)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		if t.Failed() {
			t.Logf("memoryd %s stderr:\n%s", addr, harness.TailOf(p.logs.String(), 4000))
		}
	})
	conn, err := dial.New(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	p.mem = memoryv1.NewMemoryServiceClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		_, err := p.mem.GetMemory(ctx, &memoryv1.GetMemoryRequest{Key: "ready?"})
		cancel()
		if status.Code(err) == codes.NotFound {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("memoryd did not come up: %v\n%s", err, p.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// increment is update_memory's loop over the RPCs: read, add one,
// compare-and-swap, again on conflict.
func increment(ctx context.Context, mem memoryv1.MemoryServiceClient, key string) error {
	for {
		var n int
		rev := uint64(0)
		resp, err := mem.GetMemory(ctx, &memoryv1.GetMemoryRequest{Key: key})
		switch {
		case err == nil:
			n, _ = strconv.Atoi(resp.GetRecord().GetValueJson())
			rev = resp.GetRecord().GetRevision()
		case status.Code(err) != codes.NotFound:
			return err
		}
		_, err = mem.UpdateMemory(ctx, &memoryv1.UpdateMemoryRequest{Key: key, ValueJson: strconv.Itoa(n + 1), ExpectedRevision: rev})
		if status.Code(err) != codes.Aborted {
			return err
		}
	}
}

// Two memoryd processes on one database, with 16 writers split between
// them, all incrementing the same counters by compare-and-swap: not one
// increment is lost or counted twice. The processes get their password
// the two ways a deployment passes it, PGPASSWORD and a password file,
// from a server that demands it (scram-sha-256).
func TestE2ETwoMemorydOnOneDatabase(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t, pgtest.Options{HBA: []string{"host all app 127.0.0.1/32 scram-sha-256"}})
	if err := srv.Exec(t.Context(), "postgres", "CREATE ROLE app LOGIN PASSWORD 'pw-of-app'", "CREATE DATABASE app OWNER app"); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("postgres://app@%s/app?sslmode=disable", srv.HostPort())
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("pw-of-app\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startMemoryd(t, map[string]string{"PGPASSWORD": "pw-of-app"}, "--store", url)
	b := startMemoryd(t, map[string]string{"CODEEXEC_STORE": url}, "--store-password-file", pwFile)
	const writers, per = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		mem := a.mem
		if w%2 == 1 {
			mem = b.mem
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				for _, key := range []string{"counter", fmt.Sprintf("c%d", w%4)} {
					if err := increment(t.Context(), mem, key); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for key, want := range map[string]int{"counter": writers * per, "c0": writers / 4 * per, "c3": writers / 4 * per} {
		for _, p := range []*memorydProc{a, b} {
			resp, err := p.mem.GetMemory(t.Context(), &memoryv1.GetMemoryRequest{Key: key})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetRecord().GetValueJson(); got != strconv.Itoa(want) || resp.GetRecord().GetRevision() != uint64(want) {
				t.Errorf("%s = %s at revision %d, want %d", key, got, resp.GetRecord().GetRevision(), want)
			}
		}
	}
}

// A user's way from one machine to PostgreSQL: memory saved by `codeexec
// serve` on its bbolt file, upstream's state imported, then `memoryd copy`
// into PostgreSQL (twice: the second run adds nothing), `serve --store`
// sees it all from a sandbox, and `memoryd backup --store` writes a bbolt
// file that serve opens again.
func TestE2EMoveToPostgres(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	c, _ := harness.StartStdio(t, harness.StateEnv(home))
	harness.Code(t, c, `save_memory("plan", {"step": 3}, metadata={"owner": "me"})`)
	harness.Code(t, c, `save_memory("plan", {"step": 4}, metadata={"owner": "me"})`)
	harness.Code(t, c, `
def double(x):
    """Twice x."""
    return 2 * x
save_tool(double)`)
	// serve keeps running: the copy reads the file through it.
	url := pgtest.NewDatabase(t)
	db := filepath.Join(home, "MCPs", "codeexec.db")
	env := harness.StateEnv(home)
	for i, want := range []string{"memory: 1 added, 0 already there", "memory: 0 added, 1 already there"} {
		out, err := runBinary(t, env, "memoryd", "copy", "--from", db, "--to", url)
		if err != nil {
			t.Fatalf("copy %d: %v\n%s", i, err, out)
		}
		if !strings.Contains(out, want) || !strings.Contains(out, "tools: ") {
			t.Errorf("copy %d reported:\n%s\nwant %q", i, out, want)
		}
	}
	out, err := runBinary(t, env, "import-upstream", "--store", url, filepath.Join(harness.Root, "memoryd", "testdata", "upstream"))
	if err != nil {
		t.Fatalf("import-upstream --store: %v\n%s", err, out)
	}
	if !strings.Contains(out, "imported 4 memories and 4 tools") {
		t.Errorf("import-upstream --store reported:\n%s", out)
	}

	pg, _ := harness.StartStdio(t, map[string]string{"CODEEXEC_STORE": url})
	o := harness.Code(t, pg, `
info = get_memory_info("plan")
print(load_memory("plan"), info["metadata"], info["revision"] if "revision" in info else "")
import user_tools
print(user_tools.double(21))
save_memory("from-postgres", [1, 2]);`)
	if got := harness.Joined(o.Stdout()); !strings.HasPrefix(got, "{'step': 4} {'owner': 'me'}") || !strings.HasSuffix(got, "\n42") {
		t.Errorf("serve --store sees:\n%s", got)
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	if out, err := runBinary(t, env, "memoryd", "backup", "--store", url, backup); err != nil {
		t.Fatalf("memoryd backup --store: %v\n%s", err, out)
	}
	back, _ := harness.StartStdio(t, map[string]string{"CODEEXEC_DB": backup})
	o = harness.Code(t, back, `print(load_memory("from-postgres"), load_memory("plan"))`)
	if got := harness.Joined(o.Stdout()); got != "[1, 2] {'step': 4}" {
		t.Errorf("serve on the backup of PostgreSQL sees %q", got)
	}
}

// runBinary runs one codeexec command to its end with exactly env (as the
// in-process run got it from getenv) and returns what it wrote.
func runBinary(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), harness.Binary, args...)
	cmd.Env = make([]string, 0, len(env))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
