package memoryd_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/pgtest"
)

// writeFor saves like write (even writers fresh keys, odd writers one
// key overwritten with a growing counter) until ctx ends, and reports
// every failed call: over PostgreSQL a call waits for the database to
// come back instead of failing.
func writeFor(ctx context.Context, t *testing.T, mem memoryv1.MemoryServiceClient, led *ledger, w int, acked *atomic.Int64) {
	for i := 0; ctx.Err() == nil; i++ {
		key, val := fmt.Sprintf("w%d-%d", w, i), fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
		var n int
		if w%2 == 1 {
			key = fmt.Sprintf("counter-w%d", w)
			led.mu.Lock()
			n = led.last[key] + 1
			led.attempted[key] = n
			led.mu.Unlock()
			val = strconv.Itoa(n)
		}
		if _, err := mem.SaveMemory(context.WithoutCancel(ctx), &memoryv1.SaveMemoryRequest{Key: key, ValueJson: val}); err != nil {
			t.Errorf("writer %d: a save failed instead of waiting for the database: %v", w, err)
			return
		}
		acked.Add(1)
		led.mu.Lock()
		if w%2 == 1 {
			led.last[key] = n
		} else {
			led.once[key] = val
		}
		led.mu.Unlock()
	}
}

// TestPostgresKillNine kills the database server with SIGKILL (the
// postmaster and every backend at once, as a crash does) while writers
// run through memoryd, three times, and restarts it each time. The
// writers' calls wait and then succeed; every acknowledged write is in
// the database after its crash recovery, with its acknowledged value.
func TestPostgresKillNine(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t, pgtest.Options{})
	e := start(t, memoryd.Config{Store: srv.CreateDatabase(t), StoreWait: time.Minute})
	led := &ledger{once: map[string]string{}, last: map[string]int{}, attempted: map[string]int{}}
	var acked atomic.Int64
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() { defer wg.Done(); writeFor(ctx, t, e.mem, led, w, &acked) }()
	}
	const rounds = 3
	for round := range rounds {
		time.Sleep(time.Duration(150+rand.IntN(300)) * time.Millisecond)
		before := acked.Load()
		srv.Kill()
		time.Sleep(200 * time.Millisecond) // calls now fail and wait
		if err := srv.Restart(); err != nil {
			cancel()
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for acked.Load() <= before+6 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if acked.Load() <= before {
			t.Fatalf("round %d: no write was acknowledged after the restart", round)
		}
	}
	cancel()
	wg.Wait()
	verify(t, e.mem, led, rounds)
	b, _ := os.ReadFile(srv.LogFile())
	if n := strings.Count(string(b), "database system was interrupted") + strings.Count(string(b), "not properly shut down"); n < rounds {
		t.Errorf("the server's log shows %d crash recoveries, want %d: were the kills real?\n%s", n, rounds, b)
	}
	t.Logf("%d acknowledged writes over %d kills, all present", acked.Load(), rounds)
}

// TestPostgresFailover runs a primary with a synchronous streaming
// standby, and two memoryd on a multi-host URL with
// target_session_attrs=read-write. Writers save and increment counters
// by compare-and-swap through both; the primary is killed with SIGKILL
// and the standby promoted. Every call waits and then succeeds, every
// acknowledged write is on the new primary, and every counter equals its
// acknowledged increments exactly: a write retried after the failover
// was applied once.
func TestPostgresFailover(t *testing.T) {
	t.Parallel()
	primary := pgtest.Start(t, pgtest.Options{})
	if err := primary.Exec(t.Context(), "postgres", "CREATE DATABASE memory"); err != nil {
		t.Fatal(err)
	}
	standby := primary.StartStandby(t, true)
	url := fmt.Sprintf("postgres://postgres@%s,%s/memory?target_session_attrs=read-write&sslmode=disable&connect_timeout=2",
		primary.HostPort(), standby.HostPort())
	cfg := memoryd.Config{Store: url, StoreWait: time.Minute}
	a, b := start(t, cfg), start(t, cfg)

	led := &ledger{once: map[string]string{}, last: map[string]int{}, attempted: map[string]int{}}
	var acked, increments atomic.Int64
	var lastAck atomic.Int64 // Unix nanoseconds of the latest acknowledgement
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for w := range 8 {
		e := a
		if w%2 == 1 {
			e = b
		}
		wg.Add(2)
		go func() { defer wg.Done(); writeFor(ctx, t, e.mem, led, w, &acked) }()
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := incrementCounter(context.WithoutCancel(ctx), e.mem); err != nil {
					t.Errorf("an increment failed instead of waiting for the failover: %v", err)
					return
				}
				increments.Add(1)
				lastAck.Store(time.Now().UnixNano())
			}
		}()
	}
	time.Sleep(400 * time.Millisecond)
	killed := time.Now()
	primary.Kill()
	time.Sleep(300 * time.Millisecond) // the orchestrator notices
	before := increments.Load()
	promoted := time.Now()
	if err := standby.Promote(t.Context()); err != nil {
		cancel()
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for increments.Load() == before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	carriedOn := time.Since(promoted)
	if increments.Load() == before {
		cancel()
		t.Fatal("no increment was acknowledged within 30s of the promotion")
	}
	time.Sleep(300 * time.Millisecond)
	cancel()
	wg.Wait()
	verify(t, a.mem, led, 1)
	resp, err := b.mem.GetMemory(t.Context(), &memoryv1.GetMemoryRequest{Key: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetRecord().GetValueJson(); got != strconv.FormatInt(increments.Load(), 10) {
		t.Errorf("counter = %s after the failover; %d increments were acknowledged", got, increments.Load())
	}
	t.Logf("killed the primary %s before the promotion; first write %s after it; %d saves and %d increments acknowledged, all present",
		promoted.Sub(killed).Round(time.Millisecond), carriedOn.Round(time.Millisecond), acked.Load(), increments.Load())
}

// BenchmarkFailover times how long memoryd takes to carry on after the
// primary is killed with SIGKILL and its synchronous standby promoted, for
// a writer saving in a loop through a multi-host URL: from the end of the
// promotion (pg_promote returned) to the writer's first acknowledged save,
// and from the kill to that save, promotion included. Each iteration
// builds a fresh primary and standby; run it with -benchtime 5x.
func BenchmarkFailover(b *testing.B) {
	var afterPromote, afterKill, promote []time.Duration
	b.StopTimer()
	for range b.N {
		primary := pgtest.Start(b, pgtest.Options{})
		if err := primary.Exec(b.Context(), "postgres", "CREATE DATABASE memory"); err != nil {
			b.Fatal(err)
		}
		standby := primary.StartStandby(b, true)
		url := fmt.Sprintf("postgres://postgres@%s,%s/memory?target_session_attrs=read-write&sslmode=disable&connect_timeout=2",
			primary.HostPort(), standby.HostPort())
		e := start(b, memoryd.Config{Store: url, StoreWait: time.Minute})
		var lastAck atomic.Int64
		ctx, cancel := context.WithCancel(b.Context())
		done := make(chan error, 1)
		go func() {
			for i := 0; ctx.Err() == nil; i++ {
				if _, err := e.mem.SaveMemory(context.WithoutCancel(ctx), &memoryv1.SaveMemoryRequest{Key: "k", ValueJson: strconv.Itoa(i)}); err != nil {
					done <- err
					return
				}
				lastAck.Store(time.Now().UnixNano())
			}
			done <- nil
		}()
		time.Sleep(200 * time.Millisecond)
		killed := time.Now()
		primary.Kill()
		began := time.Now()
		if err := standby.Promote(b.Context()); err != nil {
			b.Fatal(err)
		}
		promoted := time.Now()
		for deadline := time.Now().Add(time.Minute); lastAck.Load() < promoted.UnixNano(); {
			if time.Now().After(deadline) {
				b.Fatal("no save was acknowledged within a minute of the promotion")
			}
			time.Sleep(100 * time.Microsecond)
		}
		ack := time.Unix(0, lastAck.Load())
		afterPromote = append(afterPromote, ack.Sub(promoted))
		afterKill = append(afterKill, ack.Sub(killed))
		promote = append(promote, promoted.Sub(began))
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		standby.Stop()
	}
	report := func(name string, d []time.Duration) {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds())/1e3, name+"-p50-ms")
		b.ReportMetric(float64(d[len(d)-1].Microseconds())/1e3, name+"-max-ms")
	}
	report("after-promote", afterPromote)
	report("after-kill", afterKill)
	report("promotion", promote)
}
