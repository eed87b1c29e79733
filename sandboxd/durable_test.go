package sandboxd_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/codeexec/codeexec/memoryd"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/grpctest"
)

// sessionStore runs a real memoryd on a bbolt file and returns a client of
// its SessionStoreService, which the replicas of a test share.
func sessionStore(t testing.TB) *grpc.ClientConn {
	t.Helper()
	svc, err := memoryd.New(memoryd.Config{Path: filepath.Join(t.TempDir(), "memory.db")}, nil)
	if err != nil {
		t.Fatalf("memoryd.New: %v", err)
	}
	t.Cleanup(func() {
		if err := svc.Close(); err != nil {
			t.Errorf("memoryd Close: %v", err)
		}
	})
	return grpctest.Start(t, svc.Register)
}

// replica is one durable sandboxd.
type replica struct {
	c   sandboxv1.SandboxServiceClient
	svc *sandboxd.Service
	// fd is the discoveryd it calls.
	fd *fakeDiscovery
	// closed is set by stop, so that cleanup does not close twice.
	closed bool
}

// stop closes the replica as a shutdown does: its sessions are given up.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	r.closed = true
	if err := r.svc.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// newReplica starts a durable sandboxd on store, advertised at addr.
func newReplica(t testing.TB, store *grpc.ClientConn, addr string, mutate func(*sandboxd.Config)) *replica {
	t.Helper()
	return newReplicaWrapped(t, store, addr, mutate, nil)
}

// newReplicaWrapped is newReplica whose session store client wrap wraps
// (to count what it stores); a nil store makes a replica without memoryd,
// whose sessions are not durable.
func newReplicaWrapped(t testing.TB, store *grpc.ClientConn, addr string, mutate func(*sandboxd.Config),
	wrap func(sessionstorev1.SessionStoreServiceClient) sessionstorev1.SessionStoreServiceClient) *replica {
	t.Helper()
	needsSandboxes(t)
	logger := slog.New(slog.DiscardHandler)
	cfg := sandboxd.DefaultConfig()
	cfg.PoolSize = 1
	cfg.Env = sandboxd.HostEnv // the host's /usr, whatever environment is built here
	cfg.Advertise = addr
	if mutate != nil {
		mutate(&cfg)
	}
	r := &replica{fd: &fakeDiscovery{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		if r.svc != nil && !r.closed {
			if err := r.svc.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
	ip := grpctest.New(t, grpctest.Options{Logger: logger})
	discoveryv1.RegisterDiscoveryServiceServer(ip.Server.GRPC, r.fd)
	var err error
	deps := sandboxd.Deps{Discovery: discoveryv1.NewDiscoveryServiceClient(ip.Conn)}
	if store != nil {
		deps.Memory = memoryv1.NewMemoryServiceClient(store)
		deps.Tools = memoryv1.NewToolServiceClient(store)
		deps.Sessions = sessionstorev1.NewSessionStoreServiceClient(store)
		if wrap != nil {
			deps.Sessions = wrap(deps.Sessions)
		}
	}
	r.svc, err = sandboxd.New(ctx, cfg, deps, logger)
	if err != nil {
		t.Fatalf("sandboxd.New: %v", err)
	}
	r.svc.Register(ip.Server.GRPC)
	ip.Start()
	r.c = sandboxv1.NewSandboxServiceClient(ip.Conn)
	return r
}

// run executes code in alice's session id and fails the test unless it
// ran.
func run(t *testing.T, c sandboxv1.SandboxServiceClient, id, code string) *execResult {
	t.Helper()
	r, err := execute(t.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: code, Timeout: durationpb.New(20 * time.Second)})
	if err != nil {
		t.Fatalf("Execute(%q): %v", code, err)
	}
	return r
}

// elsewhereOf returns the SessionElsewhere detail of err, or nil.
func elsewhereOf(err error) *sandboxv1.SessionElsewhere {
	for _, d := range status.Convert(err).Details() {
		if se, ok := d.(*sandboxv1.SessionElsewhere); ok {
			return se
		}
	}
	return nil
}

// setupState is the session state every survival test checks: a variable,
// a function, a class, an instance and an import.
const setupState = `import json
x = 41
def inc(v):
    return v + 1
class Box:
    def __init__(self, v):
        self.v = v
b = Box(inc(x))
`

const checkState = `print(x, inc(x), b.v, type(b).__name__, json.dumps([b.v]))`

const wantState = "41 42 42 Box [42]\n"

func wantRestored(t *testing.T, res *sandboxv1.ExecResult, reason string, rolledBack bool) {
	t.Helper()
	rep := res.GetRestored()
	if rep == nil {
		t.Fatalf("no restore report in %v", res)
	}
	names := slices.Sorted(slices.Values(rep.GetNames()))
	for _, n := range []string{"Box", "b", "inc", "json", "x"} {
		if !slices.Contains(names, n) {
			t.Errorf("restored names %v lack %q", names, n)
		}
	}
	if !strings.Contains(rep.GetReason(), reason) {
		t.Errorf("restore reason %q, want it to contain %q", rep.GetReason(), reason)
	}
	if rep.GetRolledBack() != rolledBack {
		t.Errorf("rolled_back = %v, want %v", rep.GetRolledBack(), rolledBack)
	}
}

// A session's state survives every way its sandbox can end: the next call
// restores the last checkpoint into a new sandbox and says so once.
func TestDurableSessionSurvivesItsSandbox(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	r := newReplica(t, store, "unix:/r1.sock", func(c *sandboxd.Config) {
		c.MemoryBytes = 128 << 20
	})
	for _, tc := range []struct {
		name, kill, reason string
		rolledBack         bool
		timeout            time.Duration
	}{
		{"timeout", "y = 1\nimport time\ntime.sleep(30)", "timed out", true, 2 * time.Second},
		{"memory bomb", "y = 1\nhog = []\nwhile True:\n    hog.append(bytearray(1 << 24))", "memory", true, 0},
		{"kill -9", "y = 1\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "stopped", true, 0},
		{"exit", "y = 1\nimport os\nos._exit(3)", "stopped", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := create(t, r.c, "alice")
			if res := run(t, r.c, id, setupState).result; res.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK || !res.GetDurable() {
				t.Fatalf("setup: %v", res)
			}
			req := &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: tc.kill, Timeout: durationpb.New(20 * time.Second)}
			if tc.timeout > 0 {
				req.Timeout = durationpb.New(tc.timeout)
			}
			killed, err := execute(t.Context(), r.c, req)
			if err != nil || !killed.result.GetStateLost() {
				t.Fatalf("the killing call: %+v, %v", killed, err)
			}
			got := run(t, r.c, id, checkState+"\nprint('y' in globals())")
			if got.stdout != wantState+"False\n" {
				t.Fatalf("after the restore: stdout %q (stderr %q), want %q and y rolled back", got.stdout, got.stderr, wantState+"False\n")
			}
			wantRestored(t, got.result, tc.reason, tc.rolledBack)
			if again := run(t, r.c, id, "print(x)").result; again.GetRestored() != nil {
				t.Errorf("the call after the restore reports a restore again: %v", again.GetRestored())
			}
		})
	}
}

// Names that cannot be checkpointed are reported by name, with what they
// held; the rest comes back.
func TestUnsaveableNamesAreReported(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	r := newReplica(t, store, "unix:/r1.sock", nil)
	id := create(t, r.c, "alice")
	run(t, r.c, id, setupState+"f = open('/workspace/notes.txt', 'w')\ngen = (i for i in range(3))\nimport threading\nlock = threading.Lock()\n")
	run(t, r.c, id, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
	got := run(t, r.c, id, checkState)
	if got.stdout != wantState {
		t.Fatalf("stdout %q (stderr %q), want %q", got.stdout, got.stderr, wantState)
	}
	lost := map[string]string{}
	for _, l := range got.result.GetRestored().GetLost() {
		lost[l.GetName()] = l.GetKind()
		if l.GetWhy() == "" {
			t.Errorf("lost name %q has no reason", l.GetName())
		}
	}
	for _, n := range []string{"f", "gen", "lock"} {
		if _, ok := lost[n]; !ok {
			t.Errorf("lost names %v lack %q", lost, n)
		}
	}
	if k := lost["f"]; !strings.Contains(k, "file") {
		t.Errorf("f is reported as %q, want an open file", k)
	}
}

// A state over the checkpoint cap makes the session not durable, said
// once; the call itself succeeds, and the last state under the cap is the
// one that comes back.
func TestOversizedStateIsNotDurable(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	r := newReplica(t, store, "unix:/r1.sock", func(c *sandboxd.Config) { c.CheckpointBytes = 1 << 20 })
	id := create(t, r.c, "alice")
	run(t, r.c, id, setupState)
	big := run(t, r.c, id, "big = bytes(2 << 20)\nx = 99")
	if big.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK {
		t.Fatalf("the call that grew the state: %v", big.result)
	}
	// The checkpoint is taken after the result, so the refusal reaches the
	// caller with the next call's result, or with this one's when the
	// agent's checkpoint frame came before the result left sandboxd: once
	// either way.
	next := run(t, r.c, id, "print(len(big))")
	nd := next.result.GetNotDurable()
	if first := big.result.GetNotDurable(); first != "" {
		if nd != "" {
			t.Errorf("not_durable said twice: %q, then %q", first, nd)
		}
		nd = first
	}
	if !strings.Contains(nd, "big (2.0 MiB)") || !strings.Contains(nd, "1.0 MiB checkpoint limit") || !strings.Contains(nd, "CODEEXEC_CHECKPOINT_BYTES") {
		t.Errorf("not_durable = %q, want it to name big, the cap and how to raise it", nd)
	}
	if again := run(t, r.c, id, "pass").result.GetNotDurable(); again != "" {
		t.Errorf("not_durable repeated: %q", again)
	}
	run(t, r.c, id, "del big")
	run(t, r.c, id, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
	got := run(t, r.c, id, "print(x, 'big' in globals())")
	if got.stdout != "99 False\n" {
		t.Errorf("after the restore: %q (stderr %q), want the state once big was gone", got.stdout, got.stderr)
	}
}

// An idle session's sandbox is stopped; its handle stays valid and the next
// call restores it.
func TestIdleSessionCostsNoSandbox(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	r := newReplica(t, store, "unix:/r1.sock", func(c *sandboxd.Config) { c.IdleTimeout = time.Second })
	id := create(t, r.c, "alice")
	run(t, r.c, id, setupState)
	waitUntil(t, "the idle session's sandbox to stop", func() bool {
		resp, err := r.c.ListSessions(t.Context(), &sandboxv1.ListSessionsRequest{Tenant: "alice"})
		return err == nil && len(resp.GetSessions()) == 0
	})
	got := run(t, r.c, id, checkState)
	if got.stdout != wantState {
		t.Fatalf("stdout %q (stderr %q)", got.stdout, got.stderr)
	}
	wantRestored(t, got.result, "idle", false)
}

// MaxSessions bounds live sandboxes, not sessions: a session beyond it
// checkpoints and stops the one idle longest.
func TestMaxSessionsBoundsLiveSandboxes(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	r := newReplica(t, store, "unix:/r1.sock", func(c *sandboxd.Config) { c.MaxSessions = 2; c.PoolSize = 0 })
	var ids []string
	for i := range 5 {
		id := create(t, r.c, "alice")
		ids = append(ids, id)
		run(t, r.c, id, "me = "+string(rune('0'+i)))
		live := 0
		resp, err := r.c.ListSessions(t.Context(), &sandboxv1.ListSessionsRequest{Tenant: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range resp.GetSessions() {
			if s.GetState() != sandboxv1.SessionState_SESSION_STATE_STOPPED {
				live++
			}
		}
		if live > 2 {
			t.Fatalf("after session %d: %d live sandboxes, want at most 2", i, live)
		}
	}
	for i, id := range ids {
		got := run(t, r.c, id, "print(me)")
		if got.stdout != string(rune('0'+i))+"\n" {
			t.Errorf("session %d sees %q (stderr %q)", i, got.stdout, got.stderr)
		}
	}
}

// A session live on one replica is refused by another with where it is;
// once its replica stops, the other restores it. A handle is bound to its
// tenant, and an ended session is gone from every replica.
func TestSessionMovesBetweenReplicas(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	a := newReplica(t, store, "unix:/a.sock", nil)
	b := newReplica(t, store, "unix:/b.sock", nil)
	id := create(t, a.c, "alice")
	run(t, a.c, id, setupState)

	_, err := execute(t.Context(), b.c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: "print(x)"})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Execute on the other replica: %v, want FAILED_PRECONDITION", err)
	}
	where := elsewhereOf(err)
	if where.GetAddress() != "unix:/a.sock" || where.GetReplica() == "" {
		t.Fatalf("SessionElsewhere = %v, want replica a's address", where)
	}
	// Another tenant and a made-up handle get one answer.
	for _, req := range []*sandboxv1.ExecuteRequest{{SessionId: id, Tenant: "mallory", Code: "print(x)"}, {SessionId: strings.Repeat("0", len(id)), Tenant: "alice", Code: "print(x)"}} {
		if _, err := execute(t.Context(), b.c, req); status.Code(err) != codes.NotFound {
			t.Errorf("Execute(%s, %s): %v, want NOT_FOUND", req.GetTenant(), req.GetSessionId(), err)
		}
	}

	a.stop(t)
	got := run(t, b.c, id, checkState)
	if got.stdout != wantState {
		t.Fatalf("on replica b: stdout %q (stderr %q)", got.stdout, got.stderr)
	}
	wantRestored(t, got.result, "stopped", false)

	if _, err := b.c.DestroySession(t.Context(), &sandboxv1.DestroySessionRequest{SessionId: id, Tenant: "alice"}); err != nil {
		t.Fatal(err)
	}
	c := newReplica(t, store, "unix:/c.sock", nil)
	for _, rep := range []*replica{b, c} {
		if _, err := execute(t.Context(), rep.c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: "print(x)"}); status.Code(err) != codes.NotFound {
			t.Errorf("Execute after DestroySession: %v, want NOT_FOUND", err)
		}
	}
}

// Code may end its own session: the result says so, and the session is
// gone from every replica, checkpoint and all.
func TestCodeEndsItsSession(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	a := newReplica(t, store, "unix:/a.sock", nil)
	b := newReplica(t, store, "unix:/b.sock", nil)
	id := create(t, a.c, "alice")
	run(t, a.c, id, "x = 1")
	got := run(t, a.c, id, "print(x)\nruntime.end_session()")
	if got.stdout != "1\n" || !got.result.GetEnded() {
		t.Fatalf("ending call: stdout %q ended %v (stderr %q)", got.stdout, got.result.GetEnded(), got.stderr)
	}
	for name, rep := range map[string]*replica{"its replica": a, "another replica": b} {
		_, err := execute(t.Context(), rep.c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: "print(x)"})
		if status.Code(err) != codes.NotFound {
			t.Errorf("%s after the session ended: %v, want NotFound", name, err)
		}
	}
	// Ending a session is a request of this call only: the next one keeps
	// its session.
	other := create(t, a.c, "alice")
	run(t, a.c, other, "y = 2")
	if got := run(t, a.c, other, "print(y)"); got.stdout != "2\n" || got.result.GetEnded() {
		t.Errorf("another session after an end: %q ended %v", got.stdout, got.result.GetEnded())
	}
}
