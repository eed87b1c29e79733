package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1" //nolint:importas // renamed sessionstorev1 once the durable package split (issue 34) lands
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/tick"
)

// Timing is a replica's lease timing. A heartbeat every Beat keeps the
// lease, which runs Lease past the last one written. The owner fences
// itself (stops running its sessions) when it has not written one for
// FenceAfter; others take over only after Lease plus Skew, so the two
// never overlap even with clocks that disagree by up to Skew. BeatTimeout
// bounds one heartbeat: less than FenceAfter, so that one slow write
// cannot fence a replica whose store is only busy.
//
// With DefaultTiming a replica that dies costs its sessions at most 7 s
// before another takes them over (at once on the same host, where a dead
// process is known for dead); a replica cut off from the store pauses its
// sandboxes after 4 s, and resumes those it still holds when the store
// answers again (see Fence).
type Timing struct {
	Beat, Lease, FenceAfter, Skew, BeatTimeout time.Duration
}

// DefaultTiming is the timing of every replica but in tests, which
// shorten it to see a fence in milliseconds.
var DefaultTiming = Timing{
	Beat:        time.Second,
	Lease:       6 * time.Second,
	FenceAfter:  4 * time.Second,
	Skew:        time.Second,
	BeatTimeout: 3 * time.Second,
}

// Replica is this sandboxd's identity and heartbeat.
type Replica struct {
	ID      string
	Address string
	// Timing is DefaultTiming unless changed before Start.
	Timing Timing
	client memoryv1.SessionStoreServiceClient
	logger *slog.Logger
	host   string
	bootID string
	now    func() time.Time

	mu        sync.Mutex
	lastOK    time.Time // when the last heartbeat was written
	onFenced  func()
	onRenewed func()
	watchdog  *time.Timer // fences FenceAfter after lastOK (armWatchdog)
	fenced    bool
	stopBeats context.CancelFunc
	done      chan struct{}
	// up is closed by the first heartbeat the store takes.
	up     chan struct{}
	upOnce sync.Once
	// tried is closed once the first heartbeat was attempted; lastErr is
	// the last attempt's error.
	tried     chan struct{}
	triedOnce sync.Once
	triedAt   time.Time
	lastErr   error
}

// NewReplica makes this process's replica identity. address is where the
// gateways reach its SandboxService.
func NewReplica(client memoryv1.SessionStoreServiceClient, address string, logger *slog.Logger) *Replica {
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return &Replica{
		ID: "r-" + NewHandle()[:16], Address: address, Timing: DefaultTiming, client: client, logger: logger,
		host: host, bootID: strings.TrimSpace(string(boot)), now: time.Now, done: make(chan struct{}), up: make(chan struct{}), tried: make(chan struct{}),
	}
}

// Start begins the heartbeats: the first at once, then one every Beat
// until ctx ends or Stop. It does not wait for the store, which may not
// serve yet (in one process, memoryd's server starts after sandboxd);
// Ready does. onFenced runs (once) when heartbeats have failed for so long
// that this replica's sessions may soon be taken over: the caller must
// stop running them. onRenewed runs after every heartbeat written, when
// the lease is fresh again, so that the caller can let what it stopped
// run on (those sessions that no other replica took meanwhile). Neither
// may block: onRenewed runs on the heartbeat's goroutine, onFenced on a
// timer's.
func (r *Replica) Start(ctx context.Context, onFenced, onRenewed func()) {
	r.onFenced, r.onRenewed = onFenced, onRenewed
	ctx, cancel := context.WithCancel(ctx)
	r.stopBeats = cancel
	go r.loop(ctx)
}

// readyGrace is how long Ready waits past a failed first heartbeat: the
// store may be starting, or memoryd taking its database over, or the host
// busy.
const readyGrace = 10 * time.Second

// Ready waits until the store has taken this replica's first heartbeat:
// before that, other replicas would take a session it claimed for one held
// by nobody. It waits for the first attempt and, if that failed, until
// readyGrace after it, and then returns the store's latest error.
func (r *Replica) Ready(ctx context.Context) error {
	select {
	case <-r.up:
		return nil
	case <-r.tried:
	case <-ctx.Done():
		return fmt.Errorf("the session store has not taken this sandbox replica's heartbeat yet: %w", ctx.Err())
	}
	r.mu.Lock()
	wait := readyGrace - r.now().Sub(r.triedAt)
	r.mu.Unlock()
	t := time.NewTimer(max(wait, 0))
	defer t.Stop()
	select {
	case <-r.up:
		return nil
	case <-t.C:
		select {
		case <-r.up: // it came in just now
			return nil
		default:
		}
		r.mu.Lock()
		err := r.lastErr
		r.mu.Unlock()
		if err == nil {
			err = errors.New("no heartbeat has been taken yet")
		}
		return fmt.Errorf("the session store does not take this sandbox replica's heartbeat: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("the session store has not taken this sandbox replica's heartbeat yet: %w", ctx.Err())
	}
}

func (r *Replica) loop(ctx context.Context) {
	defer close(r.done)
	once := func() {
		hctx, cancel := context.WithTimeout(ctx, r.Timing.BeatTimeout)
		err := r.heartbeat(hctx, r.now().Add(r.Timing.Lease))
		cancel()
		r.mu.Lock()
		r.lastErr = err
		r.mu.Unlock()
		r.triedOnce.Do(func() {
			r.mu.Lock()
			r.triedAt = r.now()
			r.mu.Unlock()
			close(r.tried)
		})
		if err == nil {
			r.armWatchdog(ctx)
			if r.onRenewed != nil {
				r.onRenewed()
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		never := r.lastOK.IsZero()
		since := r.now().Sub(r.lastOK)
		r.mu.Unlock()
		if never {
			r.logger.Warn("waiting for the session store to take this replica's first heartbeat", logkeys.Error, err)
			return
		}
		r.logger.Warn("cannot renew this replica's lease on its sessions", logkeys.Error, err, "since", since)
	}
	once() // the first at once: Ready waits for it
	tick.Every(ctx.Done(), r.Timing.Beat, once)
	r.mu.Lock()
	if r.watchdog != nil {
		r.watchdog.Stop()
	}
	r.mu.Unlock()
}

// armWatchdog sets the fence to go off FenceAfter after the last heartbeat
// the store took was sent. A timer, not the next failed attempt: an
// attempt can hang for BeatTimeout, and the ticker skips the beats it
// missed meanwhile, so counting on the attempts could fence late.
func (r *Replica) armWatchdog(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	d := r.Timing.FenceAfter - r.now().Sub(r.lastOK)
	if r.watchdog == nil {
		r.watchdog = time.AfterFunc(d, r.fence)
		return
	}
	r.watchdog.Reset(d)
}

// fence runs when the watchdog goes off: unless a heartbeat came in
// meanwhile, the lease may lapse soon, and the sessions must stop.
func (r *Replica) fence() {
	r.mu.Lock()
	since := r.now().Sub(r.lastOK)
	fire := since >= r.Timing.FenceAfter && !r.fenced
	if fire {
		r.fenced = true
	}
	r.mu.Unlock()
	if fire && r.onFenced != nil {
		r.logger.Error("lease not renewed for too long: holding this replica's sessions, their sandboxes paused, until the store takes a heartbeat again or another replica takes them over", "since", since)
		r.onFenced()
	}
}

func (r *Replica) heartbeat(ctx context.Context, until time.Time) error {
	// The lease runs from when the heartbeat was sent, not from when its
	// answer came: fencing counts from there too.
	sent := r.now()
	_, err := r.client.PutReplica(ctx, &memoryv1.PutReplicaRequest{Replica: &memoryv1.Replica{
		Id: r.ID, Address: r.Address, ExpireTime: timestamppb.New(until), Host: r.host, Pid: int64(os.Getpid()), BootId: r.bootID,
	}})
	if err == nil {
		r.mu.Lock()
		r.lastOK = sent
		r.fenced = false
		r.mu.Unlock()
		r.upOnce.Do(func() { close(r.up) })
	}
	return err
}

// SinceRenewed is how long ago the last heartbeat the store took was
// sent.
func (r *Replica) SinceRenewed() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now().Sub(r.lastOK)
}

// Fenced reports whether this replica must not run sessions now: its
// lease may be about to lapse.
func (r *Replica) Fenced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fenced || r.now().Sub(r.lastOK) >= r.Timing.FenceAfter
}

// Stop ends the heartbeats and gives the lease up at once, so that other
// replicas may take this one's sessions (after it has released them, or
// right away if it could not).
func (r *Replica) Stop(ctx context.Context) {
	if r.stopBeats != nil {
		r.stopBeats()
		<-r.done
	}
	// The Unix epoch, not a moment ago: a lease given up is free at once,
	// without the skew margin that a lapsed one waits out.
	if err := r.heartbeat(ctx, time.Unix(0, 0)); err != nil {
		r.logger.Warn("could not give up this replica's lease; its sessions move once it lapses", logkeys.Error, err)
	}
}

// alive reports whether a heartbeat still holds its sessions, seen from
// this replica. A replica on this same host and boot whose process is gone
// is dead at once: that is the restart of `codeexec serve`.
func (r *Replica) alive(h *memoryv1.Replica) bool {
	if h == nil {
		return false
	}
	if exp := h.GetExpireTime().AsTime(); !exp.After(time.Unix(0, 0)) || !exp.Add(r.Timing.Skew).After(r.now()) {
		return false
	}
	if h.GetBootId() != "" && h.GetBootId() == r.bootID && h.GetHost() == r.host && h.GetPid() > 0 {
		if err := syscall.Kill(int(h.GetPid()), 0); err != nil && err != syscall.EPERM {
			return false
		}
	}
	return true
}

func sortStrings(s []string) { slices.Sort(s) }
