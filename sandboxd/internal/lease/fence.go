package lease

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codeexec/codeexec/services/logkeys"
)

// Fence holds a replica's sessions while its own lease may lapse.
//
// A replica that has not renewed its lease for a while (Replica) must not
// run its sessions' code on: once the lease has lapsed, another replica
// may take them over. It pauses their sandboxes rather than stopping
// them, and holds every call for them until it knows whether it still
// holds the session. A store that no replica reaches (a database
// restarting or failing over) lets no replica take a session over, so
// once the store answers again, each session whose record this replica
// can rewrite unchanged, at the revision it last wrote, resumes where it
// was, a call in flight included (Store.Reassert). The rewrite makes a
// replica that read the record before, and judged this one's lease
// lapsed, fail its own compare-and-swap and look again. A session that
// another replica took meanwhile has its paused sandbox stopped: it lives
// on there, from its checkpoint. A call for a session not yet settled
// waits for the store until its timeout, then fails with ErrPaused
// (Lease.WaitSettled).
//
// Sessions the store never recorded (they were made while it was down)
// have no lease and are left running: no other replica can take them. A
// sandbox that cannot be paused (an engine without a freezer) is stopped,
// and its session dropped, as every session was before pausing existed:
// its next call takes it from the store again.
//
// Pausing runs on a goroutine of each fence, settling on the fence's
// worker (Run), and neither on the heartbeat's goroutine, whose next
// heartbeat must not wait for a container runtime; a lease's hold and its
// settling take turns (Lease.holdMu), and settling checks that no fence
// came since it began (gen).
type Fence struct {
	replica *Replica
	leases  func() []*Lease
	logger  *slog.Logger
	wake    chan struct{}

	mu sync.Mutex
	// fencing is set from a fence until every held lease is settled; gen
	// counts the fences.
	fencing bool
	gen     uint64
}

// NewFence returns the fence of replica over the leases that leases lists
// (those of the sessions live here).
func NewFence(replica *Replica, leases func() []*Lease, logger *slog.Logger) *Fence {
	return &Fence{replica: replica, leases: leases, logger: logger, wake: make(chan struct{}, 1)}
}

// Start starts the replica's heartbeats, with the fence set to go off
// when they fail for too long.
func (f *Fence) Start(ctx context.Context) {
	f.replica.Start(ctx, f.fenced, f.renewed)
}

// fenced is the replica's onFenced: every lease is held.
func (f *Fence) fenced() { go f.holdAll() }

// renewed is the replica's onRenewed, after each heartbeat the store took.
func (f *Fence) renewed() {
	if f.isFencing() {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

func (f *Fence) isFencing() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fencing
}

// Run settles held leases, after each heartbeat the store takes, until
// ctx ends.
func (f *Fence) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		}
		if f.isFencing() && !f.replica.Fenced() {
			f.settleAll(ctx)
		}
	}
}

// holdAll holds every lease: calls wait, and live sandboxes are paused.
func (f *Fence) holdAll() {
	f.mu.Lock()
	f.fencing = true
	f.gen++
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range f.leases() {
		wg.Go(func() {
			if err := l.hold(); err != nil {
				l.logger.Warn("could not pause the session's sandbox; stopping it", logkeys.Error, err)
				l.owner.Drop("")
				l.EndHold()
			}
		})
	}
	wg.Wait()
}

// settleAll settles every held lease; one the store could not answer for
// stays held until the next heartbeat.
func (f *Fence) settleAll(ctx context.Context) {
	f.mu.Lock()
	gen := f.gen
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	var (
		wg         sync.WaitGroup
		left, done atomic.Int32
	)
	for _, l := range f.leases() {
		if !l.Held() {
			continue
		}
		wg.Go(func() {
			if f.settle(ctx, l, gen) {
				done.Add(1)
			} else {
				left.Add(1)
			}
		})
	}
	wg.Wait()
	f.mu.Lock()
	finished := left.Load() == 0 && f.gen == gen
	if finished {
		f.fencing = false
	}
	f.mu.Unlock()
	if finished {
		f.logger.Info("the session store takes this replica's heartbeats again: its held sessions are settled", "settled", done.Load())
	}
}

// settleTimeout bounds settleAll's writes: less than the lease the
// heartbeat just renewed.
const settleTimeout = 2 * time.Second

// settle resumes l's session if this replica still holds it, or drops
// it; false leaves it held, to try again.
func (f *Fence) settle(ctx context.Context, l *Lease, gen uint64) bool {
	still, err := l.store.Reassert(ctx, l)
	switch {
	case err != nil:
		l.logger.Warn("could not tell whether this replica still holds a held session; it stays held", logkeys.Error, err)
		return false
	case !still:
		l.logger.Warn("a held session was taken over by another replica meanwhile, or ended there; stopping its sandbox here")
		l.owner.Drop("the session was taken over by another sandbox replica while this one could not reach the session store; retry the call, which goes there")
		l.EndHold() // its calls go on, and find it gone
		return true
	}
	return f.unhold(l, gen)
}

// unhold, unless a fence came since gen or the lease is stale again,
// resumes l's paused sandbox and lets the waiting calls go on.
func (f *Fence) unhold(l *Lease, gen uint64) bool {
	l.holdMu.Lock()
	defer l.holdMu.Unlock()
	f.mu.Lock()
	fencedSince := f.gen != gen
	f.mu.Unlock()
	if fencedSince || f.replica.Fenced() {
		// Running now could overlap another replica's takeover; the
		// next heartbeat the store takes settles it again.
		return false
	}
	l.hmu.Lock()
	sb := l.paused
	l.hmu.Unlock()
	if sb != nil && sb.Alive() {
		if err := sb.Resume(); err != nil {
			l.logger.Warn("could not resume the session's sandbox; stopping it", logkeys.Error, err)
			l.Lost("its sandbox could not be resumed after the session store came back", true)
			l.owner.StopSandbox()
		}
	}
	l.EndHold()
	return true
}
