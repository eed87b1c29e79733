package session_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
	"github.com/codeexec/codeexec/sandboxd/internal/broker"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
	"github.com/codeexec/codeexec/sandboxd/internal/lease"
	"github.com/codeexec/codeexec/sandboxd/internal/session"
	"github.com/codeexec/codeexec/services/grpctest"
)

// storeConn runs a real memoryd on a bbolt file, which the managers of a
// test share: its session store, memory and saved tools.
func storeConn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	svc, err := memoryd.New(memoryd.Config{Path: filepath.Join(t.TempDir(), "memory.db")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return grpctest.Start(t, svc.Register)
}

// cuttable is a connection to the session store that can be cut: while it
// is, every call fails as a call to a store that is down does; with
// sessionsOnly, only the writes of session records do.
type cuttable struct {
	grpc.ClientConnInterface
	cut, sessionsOnly atomic.Bool
}

func (c *cuttable) down(method string) error {
	if !c.cut.Load() || c.sessionsOnly.Load() && !strings.HasSuffix(method, "/PutSession") {
		return nil
	}
	return status.Error(codes.Unavailable, "the store did not answer (cut by the test)")
}

func (c *cuttable) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if err := c.down(method); err != nil {
		return err
	}
	return c.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}

func (c *cuttable) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if err := c.down(method); err != nil {
		return nil, err
	}
	return c.ClientConnInterface.NewStream(ctx, desc, method, opts...)
}

// fast is a lease timing that fences in a fifth of a second.
var fast = lease.Timing{Beat: 20 * time.Millisecond, Lease: 400 * time.Millisecond, FenceAfter: 200 * time.Millisecond, Skew: 50 * time.Millisecond, BeatTimeout: 100 * time.Millisecond}

// replica is one Manager of a test, as sandboxd makes it, but for its
// sandboxes: real agents in the Direct engine, without isolation.
type replica struct {
	m    *session.Manager
	link *cuttable
	// id is its replica ID, when it has a store.
	id string
}

// options change a replica: its Config, and its lease timing.
type options struct {
	config func(*session.Config)
	timing lease.Timing
}

// newReplica starts a Manager on the store behind conn (nil: none),
// advertised at addr.
func newReplica(t *testing.T, conn *grpc.ClientConn, addr string, o options) *replica {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	dir, argv, env := enginetest.Agent(t)
	cfg := session.Config{
		Engine: enginetest.NewDirect(t), Broker: &broker.Broker{}, AgentDir: dir, Argv: argv, Env: env,
		OutputLimit: 256 << 10, DefaultTimeout: 20 * time.Second, MaxTimeout: time.Minute, StartTimeout: 30 * time.Second,
	}
	r := &replica{}
	if conn != nil {
		r.link = &cuttable{ClientConnInterface: conn}
		cfg.Broker = &broker.Broker{Memory: memoryv1.NewMemoryServiceClient(conn), Tools: memoryv1.NewToolServiceClient(conn)}
		c := sessionstorev1.NewSessionStoreServiceClient(r.link)
		rep := lease.NewReplica(c, addr, logger)
		if o.timing != (lease.Timing{}) {
			rep.Timing = o.timing
		}
		r.id = rep.ID
		cfg.Durable = &session.Durability{Store: lease.NewStore(c, rep, time.Hour)}
	}
	if o.config != nil {
		o.config(&cfg)
	}
	m, err := session.NewManager(context.Background(), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	r.m = m
	return r
}

// create makes a session of alice's.
func (r *replica) create(t *testing.T) string {
	t.Helper()
	info, err := r.m.Create(t.Context(), "alice", "", nil)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return info.ID
}

// exec runs code in alice's session id with a 20 s timeout.
func (r *replica) exec(ctx context.Context, id, code string) (*session.Result, string, error) {
	var out strings.Builder
	res, err := r.m.Execute(ctx, session.Request{Tenant: "alice", SessionID: id, Code: code, Timeout: 20 * time.Second}, func(ev session.Event) error {
		out.WriteString(ev.Text)
		return nil
	})
	return res, out.String(), err
}

// run is exec that fails the test unless the code ran.
func (r *replica) run(t *testing.T, id, code string) (*session.Result, string) {
	t.Helper()
	res, out, err := r.exec(t.Context(), id, code)
	if err != nil {
		t.Fatalf("Execute(%q): %v", code, err)
	}
	return res, out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// elsewhere returns where err says the session is live, or "".
func elsewhere(err error) string {
	var e *session.ElsewhereError
	if errors.As(err, &e) {
		return e.Address
	}
	return ""
}
