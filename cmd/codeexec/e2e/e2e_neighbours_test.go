package e2e

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// Helpers of the tests in which one tenant tries to deny service to
// another (issue 38): two tenants over authenticated HTTP, the other
// tenant's calls timed beside a baseline from the same run, and host
// counters read before and after.

// neighbours is a codeexec serving two tenants over HTTP: alpha, who
// misbehaves, and beta, whose calls must keep working.
type neighbours struct {
	base        string
	alpha, beta *client.Client
	logs        *harness.LockedBuffer // the server's log
	pid         int                   // the server's
}

// startNeighbours starts `codeexec serve --http` with tenants alpha and
// beta, the extra environment and arguments, and a client of each.
func startNeighbours(t *testing.T, extra map[string]string, args ...string) neighbours {
	t.Helper()
	env := map[string]string{"CODEEXEC_TOKENS_FILE": harness.TokensFile(t, map[string]string{"alpha-token": "alpha", "beta-token": "beta"})}
	for k, v := range extra {
		env[k] = v
	}
	addr := harness.FreeAddr(t)
	cmd, logs := harness.StartCommand(t, harness.BaseEnv(t, env), append([]string{"serve", "--http", addr}, args...)...)
	base := "http://" + addr
	harness.WaitHTTP(t, base+"/healthz")
	return neighbours{base: base, alpha: tokenClient(t, base, "alpha-token"), beta: tokenClient(t, base, "beta-token"), logs: logs, pid: cmd.Process.Pid}
}

// bystander times a tenant's ordinary calls, so that a test can show them
// going on while another tenant attacks.
type bystander struct {
	c    *client.Client
	code string // prints "ok"

	mu       sync.Mutex
	baseline []time.Duration
	during   []time.Duration
	errs     []string
}

// baselineCalls is how many of the bystander's calls make its baseline.
const baselineCalls = 3

// newBystander warms c's session up and takes its baseline: baselineCalls
// calls of code, which must print "ok".
func newBystander(t *testing.T, c *client.Client, code string) *bystander {
	t.Helper()
	b := &bystander{c: c, code: code}
	for range baselineCalls + 1 {
		d, err := b.call(t.Context())
		if err != "" {
			t.Fatalf("the bystander's baseline call failed: %s", err)
		}
		b.baseline = append(b.baseline, d)
	}
	b.baseline = b.baseline[1:] // the first started the session
	return b
}

// call runs the bystander's code once; it returns its time, or what went
// wrong.
func (b *bystander) call(ctx context.Context) (time.Duration, string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	o, err := harness.CallRunPython(ctx, b.c, map[string]any{"code": b.code})
	d := time.Since(start)
	switch {
	case err != nil:
		return d, err.Error()
	case o.IsError || harness.Joined(o.Stdout()) != "ok":
		return d, harness.TailOf(o.Text, 400)
	}
	return d, ""
}

// during runs the bystander's calls one after another until stop is
// closed (at most limit of them), recording each.
func (b *bystander) keepCalling(ctx context.Context, stop <-chan struct{}, limit int) {
	for range limit {
		select {
		case <-stop:
			return
		default:
		}
		d, err := b.call(ctx)
		b.mu.Lock()
		b.during = append(b.during, d)
		if err != "" {
			b.errs = append(b.errs, err)
		}
		b.mu.Unlock()
	}
}

// check fails the test if any call made during the attack failed, or none
// was made, and logs their times beside the baseline. The times are not
// asserted (the machine is shared and noisy): they are what the test
// reports.
func (b *bystander) check(t *testing.T, what string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errs) > 0 {
		t.Errorf("during %s, %d of the other tenant's %d calls failed; first: %s", what, len(b.errs), len(b.during), b.errs[0])
	}
	if len(b.during) == 0 {
		t.Errorf("during %s, the other tenant made no call", what)
	}
	t.Logf("the other tenant's calls during %s: median %v, max %v over %d calls; baseline median %v, max %v over %d",
		what, median(b.during), slices.Max(append([]time.Duration{0}, b.during...)), len(b.during),
		median(b.baseline), slices.Max(append([]time.Duration{0}, b.baseline...)), len(b.baseline))
}

// alongside runs attack while the bystander keeps calling, then checks
// the bystander.
func (b *bystander) alongside(t *testing.T, what string, attack func()) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { b.keepCalling(t.Context(), stop, 200) })
	attack()
	// At least one call while the attack's effects hold.
	d, err := b.call(t.Context())
	b.mu.Lock()
	b.during = append(b.during, d)
	if err != "" {
		b.errs = append(b.errs, err)
	}
	b.mu.Unlock()
	close(stop)
	wg.Wait()
	b.check(t, what)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// sigQueued is the count of signals queued for this process's user (the
// first figure of SigQ in /proc/self/status): root's, as the tests run.
func sigQueued(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "SigQ:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(v, "/", 2)[0]))
			return n
		}
	}
	t.Fatal("no SigQ in /proc/self/status")
	return 0
}

// filesInUse is the host's count of allocated file handles (the first
// figure of /proc/sys/fs/file-nr).
func filesInUse(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/fs/file-nr")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(strings.Fields(string(b))[0])
	return n
}

// waitFor polls cond every 100 ms for at most d.
func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// alphaModern is a raw client of revision 2026-07-28 with alpha's token.
func alphaModern(t *testing.T, base string) *rawMCP {
	m := modernRaw(t, base)
	m.header["Authorization"] = "Bearer alpha-token"
	return m
}
