package sandboxd_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/sandboxd"
)

// New sessions take ready sandboxes from the warm pool, which refills.
func TestWarmPoolServesNewSessions(t *testing.T) {
	t.Parallel()
	c, _, reg := newServiceWithMetrics(t, func(cfg *sandboxd.Config) { cfg.PoolSize = 2 })
	waitUntil(t, "the pool to fill", func() bool { return gauge(t, reg, "codeexec_sandbox_warm_pool") == 2 })
	for i := range 3 {
		id := create(t, c, "")
		r, err := execute(t.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Code: "print('hi')"})
		if err != nil || r.stdout != "hi\n" {
			t.Fatalf("exec %d: %+v, %v", i, r, err)
		}
		waitUntil(t, "the pool to refill", func() bool { return gauge(t, reg, "codeexec_sandbox_warm_pool") == 2 })
	}
	if hits := gauge(t, reg, "codeexec_sandbox_pool_hits_total"); hits != 3 {
		t.Fatalf("pool hits = %v, want 3: every new session should take a pooled sandbox", hits)
	}
	// The pool refills once a session's first exec is done, or sooner when
	// that exec runs long.
	id := create(t, c, "")
	finished := make(chan error, 1)
	go func() {
		_, err := execute(t.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Code: "import time; time.sleep(120)"})
		finished <- err
	}()
	waitUntil(t, "the pool to start the session", func() bool { return gauge(t, reg, "codeexec_sandbox_pool_hits_total") == 4 })
	waitUntil(t, "the pool to refill during a long first exec", func() bool { return gauge(t, reg, "codeexec_sandbox_warm_pool") == 2 })
	select {
	case err := <-finished:
		t.Fatalf("the long exec ended early: %v", err)
	default:
	}
	if _, err := c.DestroySession(t.Context(), &sandboxv1.DestroySessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the long exec ended with its session: %v", <-finished)
}

// A new sandboxd's first pooled sandboxes come from its fork server, not
// from bwrap: the pool waits for the server while that is starting, where
// a session's own start would not wait. Inside, a forked agent runs in the
// server's interpreter, whose command line names the server's script; the
// start histogram counts the pool's starts apart from sessions'.
func TestWarmPoolWaitsForTheForkServer(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root: the fork server maps uid 65534 into its user namespace, which only root may do")
	}
	c, _, reg := newServiceWithMetrics(t, func(cfg *sandboxd.Config) { cfg.PoolSize, cfg.Runtime = 2, "bwrap" })
	waitUntil(t, "the pool to fill", func() bool { return gauge(t, reg, "codeexec_sandbox_warm_pool") == 2 })
	id := create(t, c, "")
	r, err := execute(t.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id,
		Code: "print(open('/proc/self/cmdline', 'rb').read().replace(b'\\0', b' ').decode())"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.stdout, "codeexec_forkserver.py") {
		t.Errorf("the first pooled sandbox runs %q, not the fork server's interpreter", r.stdout)
	}
	if hits := gauge(t, reg, "codeexec_sandbox_pool_hits_total"); hits != 1 {
		t.Errorf("pool hits = %v, want 1", hits)
	}
	starts := map[string]uint64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "codeexec_sandbox_start_seconds" {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "for" {
						starts[l.GetValue()] += m.GetHistogram().GetSampleCount()
					}
				}
			}
		}
	}
	if _, ok := starts["session"]; !ok {
		t.Error(`codeexec_sandbox_start_seconds has no for="session" series before a session's own start`)
	}
	if starts["pool"] < 2 || starts["session"] != 0 {
		t.Errorf("codeexec_sandbox_start_seconds counts %v, want at least 2 pool starts and no session's", starts)
	}
}

func TestExecuteError(t *testing.T) {
	t.Parallel()
	c, _ := newService(t, nil)
	id := create(t, c, "alice")
	for _, tc := range []struct {
		name string
		req  *sandboxv1.ExecuteRequest
		code codes.Code
		msg  string
	}{
		{"no session id", &sandboxv1.ExecuteRequest{Code: "pass"}, codes.InvalidArgument, "session_id is required"},
		{"unknown session", &sandboxv1.ExecuteRequest{SessionId: "nope", Code: "pass"}, codes.NotFound, "no session"},
		{"another tenant's session", &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "bob", Code: "pass"}, codes.NotFound, "no session"},
		{"empty code", &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice"}, codes.InvalidArgument, "code is empty"},
		{"unknown server", &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: "pass", Servers: []string{"github"}}, codes.InvalidArgument, `unknown MCP server "github"; configured servers: "demo"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := execute(t.Context(), c, tc.req)
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Fatalf("Execute error = %v, want %s containing %q", err, tc.code, tc.msg)
			}
		})
	}
}

func TestSessionRPCErrors(t *testing.T) {
	t.Parallel()
	c, _ := newService(t, func(cfg *sandboxd.Config) { cfg.MaxSessions = 1 })
	id := create(t, c, "")
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
	}{
		{"create past the cap", func() error { _, err := c.CreateSession(ctx, &sandboxv1.CreateSessionRequest{}); return err }, codes.ResourceExhausted},
		{"get unknown", func() error { _, err := c.GetSession(ctx, &sandboxv1.GetSessionRequest{SessionId: "x"}); return err }, codes.NotFound},
		{"get other tenant", func() error {
			_, err := c.GetSession(ctx, &sandboxv1.GetSessionRequest{SessionId: id, Tenant: "eve"})
			return err
		}, codes.NotFound},
		{"reset unknown", func() error {
			_, err := c.ResetSession(ctx, &sandboxv1.ResetSessionRequest{SessionId: "x"})
			return err
		}, codes.NotFound},
		{"destroy unknown", func() error {
			_, err := c.DestroySession(ctx, &sandboxv1.DestroySessionRequest{SessionId: "x"})
			return err
		}, codes.NotFound},
		{"get own", func() error { _, err := c.GetSession(ctx, &sandboxv1.GetSessionRequest{SessionId: id}); return err }, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); status.Code(err) != tc.code {
				t.Fatalf("error = %v, want %s", err, tc.code)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	c, _ := newService(t, nil)
	ctx := t.Context()
	a, b := create(t, c, "t1"), create(t, c, "t2")

	r, err := execute(ctx, c, &sandboxv1.ExecuteRequest{SessionId: a, Tenant: "t1", Code: "x = 1\nfor i in range(3): print(i)"})
	if err != nil || r.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK || r.stdout != "0\n1\n2\n" {
		t.Fatalf("exec = %+v, %v", r, err)
	}
	if r.chunksBefore == 0 {
		t.Fatal("no output chunk was streamed before the result")
	}
	if g := r.result.GetSession().GetGeneration(); g != 1 {
		t.Fatalf("generation after the first exec = %d, want 1", g)
	}

	list, err := c.ListSessions(ctx, &sandboxv1.ListSessionsRequest{Tenant: "t1"})
	if err != nil || len(list.GetSessions()) != 1 || list.GetSessions()[0].GetId() != a {
		t.Fatalf("ListSessions(t1) = %v, %v; want only %s", list, err, a)
	}
	if all, _ := c.ListSessions(ctx, &sandboxv1.ListSessionsRequest{}); len(all.GetSessions()) != 2 {
		t.Fatalf("ListSessions() has %d sessions, want 2", len(all.GetSessions()))
	}

	// Reset loses the state and a new sandbox serves the session.
	if _, err := c.ResetSession(ctx, &sandboxv1.ResetSessionRequest{SessionId: a, Tenant: "t1"}); err != nil {
		t.Fatal(err)
	}
	r, err = execute(ctx, c, &sandboxv1.ExecuteRequest{SessionId: a, Tenant: "t1", Code: "print(x)"})
	if err != nil || r.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_ERROR || !strings.Contains(r.result.GetError(), "NameError") {
		t.Fatalf("after reset: %+v, %v", r.result, err)
	}
	if g := r.result.GetSession().GetGeneration(); g != 2 {
		t.Fatalf("generation after reset = %d, want 2", g)
	}

	// A timeout kills the sandbox; the result says so and keeps partial output.
	r, err = execute(ctx, c, &sandboxv1.ExecuteRequest{SessionId: b, Tenant: "t2", Code: "import time\nprint('started', flush=True)\ntime.sleep(30)", Timeout: durationpb.New(time.Second)})
	if err != nil || r.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_TIMEOUT || !r.result.GetStateLost() || r.stdout != "started\n" {
		t.Fatalf("timeout: %+v stdout=%q, %v", r.result, r.stdout, err)
	}
	if got := r.result.GetTimeout().AsDuration(); got != time.Second {
		t.Fatalf("effective timeout = %s, want 1s", got)
	}
	if _, err := c.DestroySession(ctx, &sandboxv1.DestroySessionRequest{SessionId: b, Tenant: "t2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSession(ctx, &sandboxv1.GetSessionRequest{SessionId: b, Tenant: "t2"}); status.Code(err) != codes.NotFound {
		t.Fatalf("destroyed session: %v, want NotFound", err)
	}
}

func TestTimeoutIsClamped(t *testing.T) {
	t.Parallel()
	c, _ := newService(t, func(cfg *sandboxd.Config) { cfg.DefaultTimeout, cfg.MaxTimeout = 2*time.Second, 3*time.Second })
	id := create(t, c, "")
	for _, tc := range []struct {
		in, want time.Duration
	}{{0, 2 * time.Second}, {time.Hour, 3 * time.Second}, {time.Millisecond, time.Second}} {
		r, err := execute(t.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Code: "pass", Timeout: durationpb.New(tc.in)})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.result.GetTimeout().AsDuration(); got != tc.want {
			t.Errorf("timeout %s became %s, want %s", tc.in, got, tc.want)
		}
	}
}

// Different sessions run in parallel: two 1-second sleeps overlap.
func TestSessionsRunInParallel(t *testing.T) {
	t.Parallel()
	c, _ := newService(t, nil)
	ids := []string{create(t, c, ""), create(t, c, "")}
	spans := make([][2]float64, 2)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := execute(t.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Code: "import time\na = time.time(); time.sleep(1); print(a, time.time())"})
			if err != nil || r.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK {
				t.Errorf("exec: %v %v", r, err)
				return
			}
			_, _ = fmt.Sscan(r.stdout, &spans[i][0], &spans[i][1])
		}()
	}
	wg.Wait()
	a, b := spans[0], spans[1]
	if !(a[0] < b[1] && b[0] < a[1]) {
		t.Fatalf("sessions did not overlap: %v and %v", a, b)
	}
}

// As upstream: a maximum below the default clamps the default too.
func TestMaxBelowDefaultClampsTheDefault(t *testing.T) {
	t.Parallel()
	c, _ := newService(t, func(cfg *sandboxd.Config) { cfg.DefaultTimeout, cfg.MaxTimeout = 30*time.Second, 2*time.Second })
	id := create(t, c, "")
	r, err := execute(t.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Code: "pass"})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.result.GetTimeout().AsDuration(); got != 2*time.Second {
		t.Fatalf("timeout = %s, want the 2s maximum", got)
	}
}
