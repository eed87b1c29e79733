package route

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// newRouter routes over the replica at base, and dials the replicas
// SessionElsewhere names.
func newRouter(t *testing.T, base *fakeSandboxd) *Router {
	t.Helper()
	conn, err := dialTest(base.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	r := NewRouter(sandboxv1.NewSandboxServiceClient(conn), dialTest)
	t.Cleanup(r.Close)
	return r
}

// execute runs on session id through r and returns the replica that
// answered.
func execute(ctx context.Context, r *Router, id string) (string, error) {
	stream, err := r.Execute(ctx, &sandboxv1.ExecuteRequest{SessionId: id, Code: "pass"})
	if err != nil {
		return "", err
	}
	var out string
	for {
		m, err := stream.Recv()
		if err != nil {
			return "", err
		}
		out += m.GetOutput().GetText()
		if m.GetResult() != nil {
			return out, nil
		}
	}
}

// deadAddress is a loopback address where nothing listens.
func deadAddress(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

// A call on a session another replica holds runs there.
func TestRouterFollowsTheHolder(t *testing.T) {
	t.Parallel()
	asked, holder := startFake(t), startFake(t)
	holder.sessions["s"] = true
	asked.elsewhere["s"] = redirect{addr: holder.addr, times: 1}
	got, err := execute(t.Context(), newRouter(t, asked), "s")
	if err != nil || got != holder.addr {
		t.Fatalf("ran on %q (%v), want the holder %s", got, err, holder.addr)
	}
}

// A holder that does not answer loses the session once its lease lapses:
// the call asks the replica it began with again, which has taken the
// session over by then.
func TestRouterWaitsOutAnUnreachableHolder(t *testing.T) {
	t.Parallel()
	asked := startFake(t)
	asked.sessions["s"] = true
	asked.elsewhere["s"] = redirect{addr: deadAddress(t), times: 2}
	r := newRouter(t, asked)
	r.holderRetry = 10 * time.Millisecond
	got, err := execute(t.Context(), r, "s")
	if err != nil || got != asked.addr {
		t.Fatalf("ran on %q (%v), want %s once the holder's lease lapsed", got, err, asked.addr)
	}
	asked.mu.Lock()
	defer asked.mu.Unlock()
	if n := len(asked.execs); n != 3 {
		t.Errorf("the replica was asked %d times, want 3 (twice sent to the holder, then the run)", n)
	}
}

// A holder that stays unreachable while its lease should have lapsed is
// named in the error.
func TestRouterGivesUpOnAHolderThatStaysUnreachable(t *testing.T) {
	t.Parallel()
	asked := startFake(t)
	dead := deadAddress(t)
	asked.elsewhere["s"] = redirect{addr: dead, times: 1 << 30}
	r := newRouter(t, asked)
	r.holderWait, r.holderRetry = 50*time.Millisecond, 10*time.Millisecond
	_, err := execute(t.Context(), r, "s")
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), "lease has not lapsed") {
		t.Fatalf("error %v: want UNAVAILABLE naming the holder %s and its lease", err, dead)
	}
}

// A session is destroyed on the replica that holds it.
func TestRouterDestroysWhereTheSessionIs(t *testing.T) {
	t.Parallel()
	asked, holder := startFake(t), startFake(t)
	holder.sessions["s"] = true
	asked.elsewhere["s"] = redirect{addr: holder.addr, times: 1}
	if _, err := newRouter(t, asked).DestroySession(t.Context(), &sandboxv1.DestroySessionRequest{SessionId: "s"}); err != nil {
		t.Fatal(err)
	}
	holder.mu.Lock()
	defer holder.mu.Unlock()
	if holder.sessions["s"] {
		t.Error("the holder still has the session")
	}
}
