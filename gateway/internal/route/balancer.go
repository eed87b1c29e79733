// Balancer spreads sandbox sessions over several sandboxd replicas.
//
// A Balancer implements sandboxv1.SandboxServiceClient, so the gateway uses
// it in place of one connection. New sessions go to the healthy replica
// with the fewest live sessions (or round robin); every later call on a
// session goes to the replica that holds it. When a replica goes away
// (its address no longer resolves, or it stops answering), its sessions
// get codes.NotFound with "session lost: …": the gateway then starts a new
// session, on a healthy replica, and tells the client that the state is
// gone. The Balancer never fails because one replica did.

package route

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/tick"
)

// Policy picks the replica for a new session.
type Policy string

// Policies.
const (
	// LeastLoaded picks the replica with the fewest live sessions routed
	// through this balancer; ties go round robin.
	LeastLoaded Policy = "least-loaded"
	// RoundRobin takes the healthy replicas in turn.
	RoundRobin Policy = "round-robin"
)

// Config configures a Balancer.
type Config struct {
	// Resolve returns the replicas' addresses (host:port). It is called at
	// start and every Interval; see Static and DNS.
	Resolve func(ctx context.Context) ([]string, error)
	// Dial connects to one replica.
	Dial func(addr string) (*grpc.ClientConn, error)
	// Policy defaults to LeastLoaded.
	Policy Policy
	// Interval between re-resolutions and health checks. Default 5s.
	Interval time.Duration
}

// Balancer is a SandboxServiceClient over several replicas.
type Balancer struct {
	cfg    Config
	logger *slog.Logger

	mu       sync.Mutex
	replicas map[string]*replica // by address
	sessions map[string]*replica // session ID -> the replica that holds it
	lost     map[string]string   // session ID -> why it was lost (until asked once)
	next     int                 // round-robin cursor

	stop chan struct{}
	done chan struct{}
}

// replica is one sandboxd.
type replica struct {
	addr    string
	conn    *grpc.ClientConn
	client  sandboxv1.SandboxServiceClient
	health  healthpb.HealthClient
	healthy bool
	live    int // sessions routed to it
}

// NewBalancer resolves the replicas once and starts the refresh loop; Close stops
// it. It fails only when the first resolution fails or finds nothing.
func NewBalancer(ctx context.Context, cfg Config, logger *slog.Logger) (*Balancer, error) {
	if cfg.Resolve == nil || cfg.Dial == nil {
		return nil, errors.New("replicas: Resolve and Dial are required")
	}
	switch cfg.Policy {
	case "":
		cfg.Policy = LeastLoaded
	case LeastLoaded, RoundRobin:
	default:
		return nil, fmt.Errorf("balancing policy %q: want %s or %s", cfg.Policy, LeastLoaded, RoundRobin)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	b := &Balancer{
		cfg: cfg, logger: logger,
		replicas: map[string]*replica{}, sessions: map[string]*replica{}, lost: map[string]string{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if err := b.refresh(ctx); err != nil {
		b.closeAll()
		return nil, err
	}
	go b.loop()
	return b, nil
}

// Close stops the refresh loop and closes every connection.
func (b *Balancer) Close() error {
	close(b.stop)
	<-b.done
	b.closeAll()
	return nil
}

func (b *Balancer) closeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.replicas {
		_ = r.conn.Close()
	}
	b.replicas = map[string]*replica{}
}

func (b *Balancer) loop() {
	defer close(b.done)
	tick.Every(b.stop, b.cfg.Interval, func() {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Interval)
		defer cancel()
		if err := b.refresh(ctx); err != nil {
			b.logger.Warn("sandboxd replicas not refreshed; keeping the last known set", logkeys.Error, err)
		}
	})
}

// refresh re-resolves the replicas, adds new ones, drops vanished ones
// (losing their sessions) and health-checks the rest.
func (b *Balancer) refresh(ctx context.Context) error {
	addrs, err := b.cfg.Resolve(ctx)
	if err != nil {
		return fmt.Errorf("resolve sandboxd replicas: %w", err)
	}
	if len(addrs) == 0 {
		return errors.New("resolve sandboxd replicas: no addresses")
	}
	want := map[string]bool{}
	for _, a := range addrs {
		want[a] = true
	}
	b.mu.Lock()
	for addr, r := range b.replicas {
		if !want[addr] {
			b.dropLocked(r, "it no longer resolves")
		}
	}
	var added []string
	for _, addr := range addrs {
		if _, ok := b.replicas[addr]; ok {
			continue
		}
		conn, err := b.cfg.Dial(addr)
		if err != nil {
			b.logger.Warn("cannot dial sandboxd replica", logkeys.Address, addr, logkeys.Error, err)
			continue
		}
		// A new replica is assumed healthy until a check says otherwise,
		// so that the first sessions need not wait for one.
		b.replicas[addr] = &replica{addr: addr, conn: conn, client: sandboxv1.NewSandboxServiceClient(conn),
			health: healthpb.NewHealthClient(conn), healthy: true}
		added = append(added, addr)
	}
	all := make([]*replica, 0, len(b.replicas))
	for _, r := range b.replicas {
		all = append(all, r)
	}
	b.mu.Unlock()
	if len(added) > 0 {
		b.logger.Info("sandboxd replicas added", "replicas", strings.Join(added, ","))
	}
	var wg sync.WaitGroup
	for _, r := range all {
		wg.Go(func() { b.check(ctx, r) })
	}
	wg.Wait()
	return nil
}

// check asks a replica's health service and records the answer. A replica
// that was healthy and is not any more loses its sessions: sandboxd keeps
// them in memory only, so a replica that went down has lost them.
func (b *Balancer) check(ctx context.Context, r *replica) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := r.health.Check(ctx, &healthpb.HealthCheckRequest{})
	ok := err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.replicas[r.addr] != r || r.healthy == ok {
		return
	}
	r.healthy = ok
	if ok {
		b.logger.Info("sandboxd replica is healthy again", logkeys.Address, r.addr)
		return
	}
	reason := "it stopped answering health checks"
	if err != nil {
		reason += " (" + status.Convert(err).Message() + ")"
	}
	b.loseSessionsLocked(r, reason)
}

// dropLocked forgets a replica.
func (b *Balancer) dropLocked(r *replica, reason string) {
	b.loseSessionsLocked(r, reason)
	delete(b.replicas, r.addr)
	_ = r.conn.Close()
}

// loseSessionsLocked marks r unhealthy and every session on it lost.
func (b *Balancer) loseSessionsLocked(r *replica, reason string) {
	r.healthy = false
	n := 0
	for id, s := range b.sessions {
		if s == r {
			delete(b.sessions, id)
			b.lost[id] = fmt.Sprintf("session lost: its sandbox replica %s went away (%s)", r.addr, reason)
			n++
		}
	}
	r.live = 0
	b.logger.Warn("sandboxd replica went away; its sessions are lost", logkeys.Address, r.addr, "reason", reason, "sessions", n)
}

// pick returns the replicas to try for a new session, best first.
func (b *Balancer) pick() []*replica {
	b.mu.Lock()
	defer b.mu.Unlock()
	addrs := slices.Sorted(maps.Keys(b.replicas))
	var healthy, sick []*replica
	for i := range addrs {
		// Rotate so that ties (and round robin) start at the cursor.
		r := b.replicas[addrs[(i+b.next)%len(addrs)]]
		if r.healthy {
			healthy = append(healthy, r)
		} else {
			sick = append(sick, r)
		}
	}
	b.next++
	if b.cfg.Policy == LeastLoaded {
		slices.SortStableFunc(healthy, func(x, y *replica) int { return x.live - y.live })
	}
	// Unhealthy replicas are a last resort: one may be back already.
	return append(healthy, sick...)
}

// route returns the replica holding session id, or a NotFound error that
// says why there is none.
func (b *Balancer) route(id string) (*replica, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.sessions[id]; ok {
		return r, nil
	}
	if why, ok := b.lost[id]; ok {
		delete(b.lost, id)
		return nil, status.Error(codes.NotFound, why)
	}
	return nil, status.Errorf(codes.NotFound, "session %s is not known to this gateway (it may have restarted): start a new session", id)
}

// failed handles an error from a call on session id at replica r. When the
// replica is unreachable the session is lost, and the error becomes
// NotFound so that the caller starts over elsewhere.
func (b *Balancer) failed(r *replica, id string, err error) error {
	b.mu.Lock()
	gone := b.replicas[r.addr] != r
	b.mu.Unlock()
	// A replica dropped meanwhile had its connection closed, which fails
	// calls on it with Canceled: that too means the session is lost.
	if status.Code(err) != codes.Unavailable && !gone {
		if status.Code(err) == codes.NotFound {
			b.forget(r, id)
		}
		return err
	}
	b.mu.Lock()
	if !gone && r.healthy {
		b.loseSessionsLocked(r, "it is unreachable: "+status.Convert(err).Message())
	}
	why, ok := b.lost[id]
	delete(b.lost, id)
	b.mu.Unlock()
	if !ok {
		why = fmt.Sprintf("session lost: its sandbox replica %s went away (%s)", r.addr, status.Convert(err).Message())
	}
	return status.Error(codes.NotFound, why)
}

// place records that replica r holds session id (it took the session over
// from the store).
func (b *Balancer) place(r *replica, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.replicas[r.addr] != r {
		return
	}
	if old, ok := b.sessions[id]; ok {
		if old == r {
			return
		}
		old.live--
	}
	b.sessions[id] = r
	r.live++
}

// forget removes a session that its replica no longer has.
func (b *Balancer) forget(r *replica, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sessions[id] == r {
		delete(b.sessions, id)
		r.live--
	}
}

// Replicas reports each replica's address, health and live sessions, for
// logs and tests.
func (b *Balancer) Replicas() []ReplicaInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]ReplicaInfo, 0, len(b.replicas))
	for _, r := range b.replicas {
		out = append(out, ReplicaInfo{Addr: r.addr, Healthy: r.healthy, Sessions: r.live})
	}
	slices.SortFunc(out, func(x, y ReplicaInfo) int { return strings.Compare(x.Addr, y.Addr) })
	return out
}

// ReplicaInfo describes one replica.
type ReplicaInfo struct {
	Addr     string
	Healthy  bool
	Sessions int
}

// ReplicaOf returns the address of the replica holding session id.
func (b *Balancer) ReplicaOf(id string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.sessions[id]
	if !ok {
		return "", false
	}
	return r.addr, true
}
