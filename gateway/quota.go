package gateway

import (
	"fmt"
	"sync"
	"time"
)

// Quotas caps what one tenant may use at once. Zero fields mean no cap.
//
// The gateway enforces them because it is where the tenant is
// authenticated and where a refusal can become a tool result the model
// reads. With several gateway replicas each enforces its own share.
type Quotas struct {
	// Sessions caps the sandbox sessions (one per MCP session) a tenant
	// holds at once.
	Sessions int
	// Execs caps the run_python calls a tenant has running at once.
	Execs int
	// ExecsPerMinute caps the run_python calls a tenant starts in any
	// sliding minute.
	ExecsPerMinute int
}

// Names of the limits, as QuotaError reports them.
const (
	LimitSessions       = "concurrent sessions"
	LimitExecs          = "concurrent executions"
	LimitExecsPerMinute = "executions per minute"
)

// QuotaError is a call refused because its tenant is over a quota.
type QuotaError struct {
	// Limit names the quota (one of the Limit constants).
	Limit string
	// Max is the configured cap.
	Max int
	// Retry says when the call can succeed.
	Retry string
	// RetryAfter is how long to wait, when known.
	RetryAfter time.Duration
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("quota exceeded: this tenant's limit of %d %s is reached; %s", e.Max, e.Limit, e.Retry)
}

func idleRetry(idle time.Duration) string {
	if idle <= 0 {
		return ""
	}
	return fmt.Sprintf(", or wait for an idle session to expire (after %v without calls)", idle)
}

// window is the span ExecsPerMinute counts over.
const window = time.Minute

// execQuota tracks each tenant's running and recent calls.
type execQuota struct {
	q   Quotas
	now func() time.Time

	mu      sync.Mutex
	running map[string]int
	starts  map[string][]time.Time
}

func newExecQuota(q Quotas) *execQuota {
	return &execQuota{q: q, now: time.Now, running: map[string]int{}, starts: map[string][]time.Time{}}
}

// acquire admits one call of tenant, or says which quota refuses it. The
// returned release must be called when the call ends.
func (x *execQuota) acquire(tenant string) (release func(), err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.now()
	if x.q.Execs > 0 && x.running[tenant] >= x.q.Execs {
		return nil, &QuotaError{Limit: LimitExecs, Max: x.q.Execs,
			Retry: "retry when one of this tenant's running calls finishes"}
	}
	if n := x.q.ExecsPerMinute; n > 0 {
		recent := x.starts[tenant]
		for len(recent) > 0 && now.Sub(recent[0]) >= window {
			recent = recent[1:]
		}
		x.starts[tenant] = recent
		if len(recent) >= n {
			wait := recent[0].Add(window).Sub(now)
			secs := seconds(wait)
			return nil, &QuotaError{Limit: LimitExecsPerMinute, Max: n, RetryAfter: wait,
				Retry: fmt.Sprintf("retry in %d s", max(secs, 1))}
		}
		x.starts[tenant] = append(recent, now)
	}
	x.running[tenant]++
	return func() {
		x.mu.Lock()
		defer x.mu.Unlock()
		if x.running[tenant]--; x.running[tenant] <= 0 {
			delete(x.running, tenant)
		}
		if len(x.starts[tenant]) == 0 {
			delete(x.starts, tenant)
		}
	}, nil
}
