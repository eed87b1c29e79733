// Package quota caps what one tenant may use of the gateway at once: its
// sandbox sessions, its running run_python calls, and the calls it starts
// in any sliding minute. A refusal is an *Error, which the gateway turns
// into a tool result that names the limit and when to retry.
package quota

import (
	"fmt"
	"sync"
	"time"
)

// Limits caps what one tenant may use at once. Zero fields mean no cap.
//
// The gateway enforces them because it is where the tenant is
// authenticated and where a refusal can become a tool result the model
// reads. With several gateway replicas each enforces its own share.
type Limits struct {
	// Sessions caps the sandbox sessions (one per MCP session) a tenant
	// holds at once.
	Sessions int
	// Execs caps the run_python calls a tenant has running at once.
	Execs int
	// ExecsPerMinute caps the run_python calls a tenant starts in any
	// sliding minute.
	ExecsPerMinute int
}

// Validate reports a negative cap.
func (l Limits) Validate() error {
	if l.Sessions < 0 || l.Execs < 0 || l.ExecsPerMinute < 0 {
		return fmt.Errorf("quotas %+v: each must be zero (no cap) or positive", l)
	}
	return nil
}

// Names of the limits, as Error reports them.
const (
	LimitSessions       = "concurrent sessions"
	LimitExecs          = "concurrent executions"
	LimitExecsPerMinute = "executions per minute"
)

// AllLimits lists the limit names, for metrics that should show every
// series from the start.
var AllLimits = []string{LimitSessions, LimitExecs, LimitExecsPerMinute}

// Error is a call refused because its tenant is over a quota.
type Error struct {
	// Limit names the quota (one of the Limit constants).
	Limit string
	// Max is the configured cap.
	Max int
	// Retry says when the call can succeed.
	Retry string
	// RetryAfter is how long to wait, when known.
	RetryAfter time.Duration
}

// Error names the limit and says when to retry.
func (e *Error) Error() string {
	return fmt.Sprintf("quota exceeded: this tenant's limit of %d %s is reached; %s", e.Max, e.Limit, e.Retry)
}

// IdleRetry is the part of a sessions-quota message that points at idle
// expiry, or "" when idle sessions never expire.
func IdleRetry(idle time.Duration) string {
	if idle <= 0 {
		return ""
	}
	return fmt.Sprintf(", or wait for an idle session to expire (after %v without calls)", idle)
}

// window is the span ExecsPerMinute counts over.
const window = time.Minute

// Execs tracks each tenant's running and recent calls against the Execs
// and ExecsPerMinute limits.
type Execs struct {
	limits Limits
	// Now is the clock. Tests replace it before the first call.
	Now func() time.Time

	mu      sync.Mutex
	running map[string]int
	starts  map[string][]time.Time
}

// NewExecs returns a tracker for limits.
func NewExecs(limits Limits) *Execs {
	return &Execs{limits: limits, Now: time.Now, running: map[string]int{}, starts: map[string][]time.Time{}}
}

// Acquire admits one call of tenant, or says which quota refuses it. The
// returned release must be called when the call ends.
func (x *Execs) Acquire(tenant string) (release func(), err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.Now()
	if x.limits.Execs > 0 && x.running[tenant] >= x.limits.Execs {
		return nil, &Error{Limit: LimitExecs, Max: x.limits.Execs,
			Retry: "retry when one of this tenant's running calls finishes"}
	}
	if n := x.limits.ExecsPerMinute; n > 0 {
		recent := x.starts[tenant]
		for len(recent) > 0 && now.Sub(recent[0]) >= window {
			recent = recent[1:]
		}
		x.starts[tenant] = recent
		if len(recent) >= n {
			wait := recent[0].Add(window).Sub(now)
			secs := int((wait + time.Second - 1) / time.Second) // rounded up
			return nil, &Error{Limit: LimitExecsPerMinute, Max: n, RetryAfter: wait,
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
