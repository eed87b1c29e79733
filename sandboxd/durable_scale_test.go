package sandboxd_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/testenv"
)

// Sizes of the scale runs, as issue 12 asks: at most 64 live sandboxes, a
// random sample of 100 checked afterwards, and the process's memory under
// a bound far above what it needs (a leak of even a few hundred KiB per
// session would cross it). The test runs 1,000 sessions, in every tier
// that has sandboxes; the benchmark runs the 10,000 of the issue, whose
// figures docs/PERFORMANCE.md records.
const (
	scaleTestSessions  = 1_000
	scaleBenchSessions = 10_000
	scaleLive          = 64
	scaleSample        = 100
	scaleRSSBound      = 1 << 30
	// scaleWorkers run sessions at once: enough to keep 2 cores busy and to
	// make sessions race for the last places, few enough that a start is
	// not starved past its timeout.
	scaleWorkers = 8
)

// 1,000 durable sessions on one replica with MaxSessions 64: each holds
// state of its own, at no time are more than 64 sandboxes alive, a random
// sample of them sees its own state on its next call (restored from its
// checkpoint), and the process's memory stays bounded.
//
// It is not parallel: it counts the bwrap processes of this test process,
// which another test's sandboxes would add to.
func TestDurableSessionsAtScale(t *testing.T) {
	testenv.Slow(t)
	f := runAtScale(t, scaleTestSessions)
	t.Log(f)
}

// BenchmarkTenThousandSessions is the same run with 10,000 sessions (some
// minutes on 2 cores; run it once: -benchtime=1x). It reports sessions a
// second, the most sandboxes alive at once and the peak RSS.
//
//	go test -run '^$' -bench TenThousandSessions -benchtime=1x ./sandboxd/
func BenchmarkTenThousandSessions(b *testing.B) {
	for range b.N {
		f := runAtScale(b, scaleBenchSessions)
		b.ReportMetric(f.perSecond, "sessions/s")
		b.ReportMetric(float64(f.maxLive), "max-live")
		b.ReportMetric(f.peakRSSMiB, "peak-RSS-MiB")
		b.Log(f)
	}
}

// scaleFigures is what one run at scale measured.
type scaleFigures struct {
	sessions        int
	filled, sampled time.Duration
	perSecond       float64
	restored        int
	maxLive         int64
	peakRSSMiB      float64
}

func (f scaleFigures) String() string {
	return fmt.Sprintf("%d sessions in %s (%.0f/s), %d sampled in %s more (%d restored from a checkpoint); at most %d live sandboxes; peak RSS %.0f MiB",
		f.sessions, f.filled.Round(time.Millisecond), f.perSecond, scaleSample,
		f.sampled.Round(time.Millisecond), f.restored, f.maxLive, f.peakRSSMiB)
}

// runAtScale runs that many sessions through one replica, as a busy
// server's would (as many at a time as there are sandboxes), checks what
// the test above says, and returns the figures.
func runAtScale(tb testing.TB, sessions int) scaleFigures {
	tb.Helper()
	store := sessionStore(tb)
	r := newReplica(tb, store, "unix:/scale.sock", func(c *sandboxd.Config) {
		c.MaxSessions = scaleLive
		// No warm pool: pooled sandboxes are live sandboxes too, and the
		// cap is on every one of them.
		c.PoolSize = 0
		// No spares either: each is a sandbox set up ahead.
		c.LaunchSpares = 0
		c.MemoryBytes = 64 << 20
	})

	var maxLive, maxRSS atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		// A sandbox here lives for seconds (64 of them, some 15 new ones a
		// second), so one more than the cap would be alive across many
		// samples; each sample costs hundreds of reads of /proc, and at
		// one every 20 ms they took three quarters of this process's CPU.
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if n := int64(liveSandboxes(tb)); n > maxLive.Load() {
				maxLive.Store(n)
			}
			if rss := selfRSS(tb); rss > maxRSS.Load() {
				maxRSS.Store(rss)
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()

	start := time.Now()
	ids := fillSessions(tb, r.c, sessions)
	filled := time.Since(start)

	restored := 0
	for _, i := range rand.Perm(sessions)[:scaleSample] {
		if ids[i] == "" {
			continue
		}
		got, err := execute(tb.Context(), r.c, &sandboxv1.ExecuteRequest{SessionId: ids[i], Tenant: "alice", Code: "print(me)", Timeout: durationpb.New(20 * time.Second)})
		if err != nil {
			tb.Errorf("session %d: Execute: %v", i, err)
			continue
		}
		if want := strconv.Itoa(i) + "\n"; got.stdout != want {
			tb.Errorf("session %d sees %q (stderr %q), want %q", i, got.stdout, got.stderr, want)
		}
		if got.result.GetRestored() != nil {
			restored++
		}
	}
	close(stopSampling)
	<-sampled
	f := scaleFigures{sessions: sessions, filled: filled, sampled: time.Since(start) - filled,
		perSecond: float64(sessions) / filled.Seconds(), restored: restored,
		maxLive: maxLive.Load(), peakRSSMiB: float64(maxRSS.Load()) / (1 << 20)}
	if n := f.maxLive; n > scaleLive {
		tb.Errorf("%d sandboxes were alive at once, want at most %d", n, scaleLive)
	} else if n == 0 {
		tb.Errorf("no sandbox was ever counted alive, though %d sessions ran: the count is broken", sessions)
	}
	if rss := maxRSS.Load(); rss > scaleRSSBound {
		tb.Errorf("peak RSS %d MiB, want under %d MiB", rss>>20, scaleRSSBound>>20)
	}
	if restored == 0 {
		tb.Errorf("none of the %d sampled sessions was restored: MaxSessions did not stop any sandbox", scaleSample)
	}
	return f
}

// fillSessions creates that many sessions, scaleWorkers at a time, each with
// state of its own, and returns their IDs ("" for one that failed).
func fillSessions(tb testing.TB, c sandboxv1.SandboxServiceClient, sessions int) []string {
	ids := make([]string, sessions)
	next := make(chan int)
	var wg sync.WaitGroup
	var failures atomic.Int64
	for range scaleWorkers {
		wg.Go(func() {
			for i := range next {
				if failures.Load() > 10 {
					continue
				}
				if err := scaleOne(tb, c, i, ids); err != nil {
					failures.Add(1)
					tb.Error(err)
				}
			}
		})
	}
	for i := range sessions {
		next <- i
	}
	close(next)
	wg.Wait()
	return ids
}

// scaleOne creates session i, gives it its own state and checks that the
// call ran and was checkpointed.
func scaleOne(tb testing.TB, c sandboxv1.SandboxServiceClient, i int, ids []string) error {
	resp, err := c.CreateSession(tb.Context(), &sandboxv1.CreateSessionRequest{Tenant: "alice"})
	if err != nil {
		return fmt.Errorf("session %d: CreateSession: %w", i, err)
	}
	id := resp.GetSession().GetId()
	res, err := execute(tb.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: "me = " + strconv.Itoa(i)})
	if err != nil {
		return fmt.Errorf("session %d: Execute: %w", i, err)
	}
	if res.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK || !res.result.GetDurable() || res.result.GetNotDurable() != "" {
		return fmt.Errorf("session %d: %v (stderr %q)", i, res.result, res.stderr)
	}
	ids[i] = id
	return nil
}

// liveSandboxes counts the sandboxes alive under this test process: the
// distinct PID namespaces, other than its own, among its descendants. Each
// sandbox has one, whether bwrap or the fork server made it, and a process
// in it lives until the sandbox is reaped.
//
// It walks down from this process through /proc/PID/task/TID/children,
// and stops at the first process of another PID namespace: a sandbox's
// other processes are inside it. (It read every process's /proc/PID/stat
// to find the descendants, other tests' and the machine's included.)
func liveSandboxes(t testing.TB) int {
	self, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Errorf("read this process's PID namespace: %v", err)
		return 0
	}
	me := strconv.Itoa(os.Getpid())
	if _, err := os.Stat("/proc/" + me + "/task/" + me + "/children"); err != nil {
		t.Errorf("cannot list this process's children (the kernel needs CONFIG_PROC_CHILDREN): %v", err)
		return 0
	}
	namespaces := map[string]bool{}
	pending := childrenOf(me)
	for len(pending) > 0 {
		pid := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		ns, err := os.Readlink("/proc/" + pid + "/ns/pid")
		if err != nil {
			continue // it exited meanwhile
		}
		if ns != self {
			namespaces[ns] = true
			continue
		}
		pending = append(pending, childrenOf(pid)...)
	}
	return len(namespaces)
}

// childrenOf lists the PIDs of pid's children, from each of its threads'
// children file; a process that exited meanwhile has none.
func childrenOf(pid string) []string {
	tasks, err := os.ReadDir("/proc/" + pid + "/task")
	if err != nil {
		return nil
	}
	var out []string
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + pid + "/task/" + task.Name() + "/children")
		if err == nil {
			out = append(out, strings.Fields(string(b))...)
		}
	}
	return out
}

// selfRSS is this process's resident set: the replica, the store and the
// test's client together, so an upper bound on sandboxd's.
func selfRSS(t testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Errorf("read /proc/self/status: %v", err)
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
