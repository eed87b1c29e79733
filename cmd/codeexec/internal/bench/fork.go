package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/sandboxd"
)

// burstResult is what starting many sessions at once gave.
type burstResult struct {
	st  stats
	max time.Duration
}

// benchBurst starts n sessions at once, without a warm pool, and times
// each to its first result, as a team's gateway meets them.
func benchBurst(ctx context.Context, logger *slog.Logger, python string, forkServer bool, n int) (burstResult, error) {
	c, stop, err := unpooledSandbox(ctx, logger, python, forkServer, n)
	if err != nil {
		return burstResult{}, err
	}
	defer stop()
	return runBurst(ctx, c, n)
}

// runBurst starts n sessions of c at once and times each to its first
// result.
func runBurst(ctx context.Context, c sandboxv1.SandboxServiceClient, n int) (burstResult, error) {
	var (
		mu   sync.Mutex
		d    []time.Duration
		ids  []string
		errs []error
		wg   sync.WaitGroup
	)
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			s, err := c.CreateSession(ctx, &sandboxv1.CreateSessionRequest{})
			if err == nil {
				_, err = execOnce(ctx, c, s.GetSession().GetId(), "pass")
			}
			took := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			d = append(d, took)
			ids = append(ids, s.GetSession().GetId())
		}()
	}
	close(start)
	wg.Wait()
	for _, id := range ids {
		_, _ = c.DestroySession(ctx, &sandboxv1.DestroySessionRequest{SessionId: id})
	}
	if len(errs) > 0 {
		return burstResult{}, fmt.Errorf("%d of %d sessions failed, the first: %w", len(errs), n, errs[0])
	}
	st := summarize(d)
	return burstResult{st: st, max: d[len(d)-1]}, nil // summarize sorted d
}

// idleMemory is what idle sessions cost the host (PSS, in bytes).
type idleMemory struct {
	// perSession is everything below this process, the fork server and
	// the spares included, divided by the sandboxes counted.
	perSession float64
	sandboxes  int
	// further is what each sandbox past the first half added: the figure
	// that decides how many fit, since what they share is paid once.
	further float64
}

// benchIdle opens n sessions one after the other, each of which runs one
// exec, and measures the host memory they hold at rest: once when half of
// them are open and again when all are.
func benchIdle(ctx context.Context, logger *slog.Logger, python string, forkServer bool, n int) (idleMemory, error) {
	c, stop, err := unpooledSandbox(ctx, logger, python, forkServer, n)
	if err != nil {
		return idleMemory{}, err
	}
	defer stop()
	return runIdle(ctx, c, n)
}

// runIdle opens n sessions of c and measures what they hold at rest.
func runIdle(ctx context.Context, c sandboxv1.SandboxServiceClient, n int) (idleMemory, error) {
	var halfTotal int64
	var halfCount int
	for i := range n {
		s, err := c.CreateSession(ctx, &sandboxv1.CreateSessionRequest{})
		if err != nil {
			return idleMemory{}, err
		}
		if _, err := execOnce(ctx, c, s.GetSession().GetId(), "pass"); err != nil {
			return idleMemory{}, err
		}
		if i+1 == n/2 {
			time.Sleep(time.Second)
			halfTotal, halfCount = treeMemory()
		}
	}
	time.Sleep(time.Second)
	total, count := treeMemory()
	m := idleMemory{sandboxes: count}
	if count > 0 {
		m.perSession = float64(total) / float64(count)
	}
	if count > halfCount && halfCount > 0 {
		m.further = float64(total-halfTotal) / float64(count-halfCount)
	}
	return m, nil
}

// unpooledSandbox is the settledSandbox that the burst and idle-memory
// rows compare with the fork server on and off: no warm pool, so that each
// new session starts a sandbox of its own, and room for n sessions.
func unpooledSandbox(ctx context.Context, logger *slog.Logger, python string, forkServer bool, n int) (sandboxv1.SandboxServiceClient, func(), error) {
	cfg := sandboxConfig(python, 0, n+8)
	cfg.ForkServer = forkServer
	return settledSandbox(ctx, logger, cfg)
}

// settledSandbox is inprocSandbox once settle has run: what the timed
// figures start from.
func settledSandbox(ctx context.Context, logger *slog.Logger, cfg sandboxd.Config) (sandboxv1.SandboxServiceClient, func(), error) {
	c, stop, err := inprocSandbox(ctx, logger, cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := settle(ctx, c); err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

// settle runs one session to its end, so that what starts lazily (the
// fork server) is up before anything is timed, then waits for the launch
// spares and the server's own start-up to finish.
func settle(ctx context.Context, c sandboxv1.SandboxServiceClient) error {
	s, err := c.CreateSession(ctx, &sandboxv1.CreateSessionRequest{})
	if err != nil {
		return err
	}
	if _, err := execOnce(ctx, c, s.GetSession().GetId(), "pass"); err != nil {
		return err
	}
	if _, err := c.DestroySession(ctx, &sandboxv1.DestroySessionRequest{SessionId: s.GetSession().GetId()}); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	return nil
}
