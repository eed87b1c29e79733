package memoryd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

// TestKillNineOwnerOfASharedFile runs three memoryd processes on one file,
// as three MCP clients' codeexec processes do, with writers incrementing
// one counter through each of them by compare-and-swap. Every round it
// kills the process that owns the file with SIGKILL and starts a new one.
// The writers of the survivors must carry on without a single error, and
// the counter must hold every acknowledged increment exactly once: at
// least the acknowledged ones, and at most one more for each increment
// that was in flight through a killed process.
func TestKillNineOwnerOfASharedFile(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "md-share-") //nolint:usetesting // short: t.TempDir is too long for a unix socket path (about 108 bytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	const rounds, writersPer = 4, 4
	var (
		mu       sync.Mutex
		acked    int  // increments acknowledged
		inFlight int  // increments that failed with their process's death
		killed   bool // the round's owner is dead
		after    int  // increments acknowledged since the round's kill
	)
	children := map[int]*child{} // pid → child
	next := 0
	spawn := func() {
		c := startChildOn(t, dir, fmt.Sprintf("c%d.sock", next))
		next++
		children[c.cmd.Process.Pid] = c
	}
	for range 3 {
		spawn()
	}
	for round := range rounds {
		ctx, cancel := context.WithCancel(t.Context())
		owner := ownerPID(t, dir)
		if children[owner] == nil {
			t.Fatalf("round %d: the owner file names pid %d, which is none of the children", round, owner)
		}
		var wg sync.WaitGroup
		for pid, c := range children {
			for range writersPer {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						err := incrementCounter(ctx, c.mem)
						mu.Lock()
						switch {
						case err == nil:
							acked++
							if killed {
								after++
							}
						case pid == owner:
							inFlight++
						case ctx.Err() == nil:
							t.Errorf("round %d: a write through surviving pid %d failed: %v", round, pid, err)
						}
						mu.Unlock()
						if err != nil {
							return
						}
					}
				}()
			}
		}
		time.Sleep(300 * time.Millisecond)
		children[owner].kill()
		mu.Lock()
		killed, after = true, 0
		mu.Unlock()
		delete(children, owner)
		// The survivors carry on: give them time to take over and write.
		time.Sleep(700 * time.Millisecond)
		cancel()
		wg.Wait()
		if after == 0 {
			t.Errorf("round %d: no increment was acknowledged after the owner's death", round)
		}
		killed = false
		spawn()
	}
	var c *child
	for _, c = range children {
		break
	}
	resp, err := c.mem.GetMemory(t.Context(), &memoryv1.GetMemoryRequest{Key: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(resp.GetRecord().GetValueJson())
	if n < acked || n > acked+inFlight {
		t.Errorf("counter = %d; %d increments were acknowledged and %d were in flight at a kill", n, acked, inFlight)
	}
	t.Logf("%d rounds: %d acknowledged increments, counter %d, %d lost with a killed process", rounds, acked, n, inFlight)
	for _, c := range children {
		c.kill()
	}
	checkBoltFile(t, filepath.Join(dir, "memory.db"))
}

// ownerPID reads the owner file of dir's database.
func ownerPID(t testing.TB, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "memory.db.owner"))
	if err != nil {
		t.Fatalf("owner file: %v", err)
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatalf("owner file %s: %v", b, err)
	}
	return info.PID
}

// incrementCounter is update_memory's loop over the RPCs.
func incrementCounter(ctx context.Context, mem memoryv1.MemoryServiceClient) error {
	for {
		var n int
		rev := uint64(0)
		resp, err := mem.GetMemory(ctx, &memoryv1.GetMemoryRequest{Key: "counter"})
		switch {
		case err == nil:
			n, _ = strconv.Atoi(resp.GetRecord().GetValueJson())
			rev = resp.GetRecord().GetRevision()
		case status.Code(err) != codes.NotFound:
			return err
		}
		_, err = mem.UpdateMemory(ctx, &memoryv1.UpdateMemoryRequest{Key: "counter", ValueJson: strconv.Itoa(n + 1), ExpectedRevision: rev})
		if status.Code(err) != codes.Aborted {
			return err
		}
	}
}

// BenchmarkTakeoverAfterKillNine kills the owner of a shared database
// with SIGKILL, b.N times, and times how long a save through a surviving
// process takes from the kill: that is how long its caller waits for the
// takeover. The baseline is the other way back from a dead owner: start a
// fresh memoryd process on the file and time its first save. Run with
// -benchtime 20x or more; it reports the median and the worst.
func BenchmarkTakeoverAfterKillNine(b *testing.B) {
	dir, err := os.MkdirTemp("", "md-takeover-") //nolint:usetesting // short: b.TempDir is too long for a unix socket path (about 108 bytes)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	next := 0
	spawn := func() *child {
		c := startChildOn(b, dir, fmt.Sprintf("c%d.sock", next))
		next++
		return c
	}
	owner, survivor := spawn(), spawn()
	var takeover, restart []time.Duration
	for i := 0; b.Loop(); i++ {
		if pid := ownerPID(b, dir); pid != owner.cmd.Process.Pid {
			owner, survivor = survivor, owner
		}
		killed := time.Now()
		owner.kill()
		if _, err := survivor.mem.SaveMemory(b.Context(), &memoryv1.SaveMemoryRequest{Key: "k", ValueJson: strconv.Itoa(i)}); err != nil {
			b.Fatalf("save after the kill: %v", err)
		}
		takeover = append(takeover, time.Since(killed))
		// Baseline: a process started after its owner's death.
		survivor.kill()
		began := time.Now()
		fresh := spawn()
		if _, err := fresh.mem.SaveMemory(b.Context(), &memoryv1.SaveMemoryRequest{Key: "k", ValueJson: strconv.Itoa(i)}); err != nil {
			b.Fatalf("save through a fresh process: %v", err)
		}
		restart = append(restart, time.Since(began))
		owner, survivor = fresh, spawn()
	}
	owner.kill()
	survivor.kill()
	report := func(name string, d []time.Duration) {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds())/1e3, name+"-p50-ms")
		b.ReportMetric(float64(d[len(d)-1].Microseconds())/1e3, name+"-max-ms")
	}
	report("takeover", takeover)
	report("restart", restart)
}
