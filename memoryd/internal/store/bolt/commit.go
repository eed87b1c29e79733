package bolt

import (
	"sync"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

// maxGroup bounds how many writes share one transaction, so that one
// commit stays short even under a flood of writers.
const maxGroup = 256

// A group waits for the writers of the previous group to come back for at
// most as long as the previous commit took, clamped to [minLinger,
// maxLinger], and stops waiting as soon as arrivalGap passes without a new
// write: writers released by one commit come back in a burst, and once the
// burst is over, waiting longer only adds latency. The wait can at most
// double a write's latency, and it saves a whole commit (two fsyncs)
// whenever the writers do come back in time.
const (
	minLinger  = 100 * time.Microsecond
	maxLinger  = 2 * time.Millisecond
	arrivalGap = 100 * time.Microsecond
)

// txFunc applies one write inside a shared transaction. It must either
// write nothing and return a domain error (ErrConflict, ErrNotFound, ...),
// or write and return nil. Any other error aborts the whole group, which is
// then retried one write per transaction; so a txFunc may run more than
// once and must set its results afresh each time.
type txFunc func(tx *bbolt.Tx) error

type pending struct {
	fn   txFunc
	done chan error
}

// committer is a group commit: one goroutine runs every pending write in a
// single bbolt transaction, so N concurrent writers share one fsync pair
// instead of paying N. Unlike bbolt.DB.Batch (which always waits 10ms for
// company) a lone writer commits at once. A group waits only for writers
// it expects: as many as were in the previous group, or as many callers as
// are already inside do. Writers woken by the last commit need a moment to
// send their next write, and without the wait the first of them would
// commit alone and split every later group in two. See minLinger for how
// long it waits.
type committer struct {
	db      *bbolt.DB
	observe func(writes int, d time.Duration) // may be nil
	ops     chan pending                      // unbuffered: a send succeeds only when the loop takes it
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once

	inflight atomic.Int64  // callers inside do, sent or about to send
	commits  atomic.Uint64 // transactions committed, for tests and benchmarks
	writes   atomic.Uint64 // writes committed
}

func newCommitter(db *bbolt.DB, observe func(writes int, d time.Duration)) *committer {
	c := &committer{db: db, observe: observe, ops: make(chan pending), stop: make(chan struct{})}
	c.wg.Add(1)
	go c.loop()
	return c
}

// do runs fn durably and returns its error. It does not take a context:
// once handed to the loop a write is committed or failed within one
// transaction, and the caller must learn which.
func (c *committer) do(fn txFunc) error {
	c.inflight.Add(1)
	defer c.inflight.Add(-1)
	p := pending{fn: fn, done: make(chan error, 1)}
	select {
	case c.ops <- p:
	case <-c.stop:
		return store.ErrClosed
	}
	return <-p.done
}

func (c *committer) loop() {
	defer c.wg.Done()
	group := make([]pending, 0, maxGroup)
	expect := 1
	linger := minLinger
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case p := <-c.ops:
			group = append(group[:0], p)
		case <-c.stop:
			return
		}
	drain:
		for len(group) < maxGroup {
			select {
			case p := <-c.ops:
				group = append(group, p)
			default:
				break drain
			}
		}
		// Callers already inside do will send within microseconds.
		expect = min(max(expect, int(c.inflight.Load())), maxGroup)
		if len(group) < expect {
			deadline := time.Now().Add(linger)
			timer.Reset(min(arrivalGap, linger))
		wait:
			for len(group) < expect {
				select {
				case p := <-c.ops:
					group = append(group, p)
					rest := time.Until(deadline)
					if rest <= 0 {
						break wait
					}
					timer.Reset(min(arrivalGap, rest))
				case <-timer.C:
					break wait
				}
			}
			timer.Stop()
		}
		expect = len(group)
		linger = min(max(c.commit(group), minLinger), maxLinger)
	}
}

// commit runs a group in one transaction and returns how long that took.
// Domain errors stay with their write; anything else makes the group fall
// back to one transaction each, so one broken write cannot fail its
// neighbours.
func (c *committer) commit(group []pending) time.Duration {
	began := time.Now()
	results := make([]error, len(group))
	err := c.db.Update(func(tx *bbolt.Tx) error {
		for i, p := range group {
			results[i] = p.fn(tx)
			if results[i] != nil && !store.IsDomain(results[i]) {
				return results[i]
			}
		}
		return nil
	})
	took := time.Since(began)
	if err == nil {
		// Observe before answering, so that a caller that has its answer
		// also sees its commit in the statistics.
		c.commits.Add(1)
		c.writes.Add(uint64(len(group)))
		if c.observe != nil {
			c.observe(len(group), took)
		}
		for i, p := range group {
			p.done <- results[i]
		}
		return took
	}
	if len(group) == 1 {
		group[0].done <- err
		return took
	}
	for _, p := range group {
		var res error
		err := c.db.Update(func(tx *bbolt.Tx) error {
			res = p.fn(tx)
			if res != nil && !store.IsDomain(res) {
				return res
			}
			return nil
		})
		if err != nil {
			res = err
		}
		p.done <- res
	}
	return time.Since(began)
}

// close stops the loop after the group in progress. Later do calls fail
// with ErrClosed.
func (c *committer) close() {
	c.once.Do(func() { close(c.stop) })
	c.wg.Wait()
}
