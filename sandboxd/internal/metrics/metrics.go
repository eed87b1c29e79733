// Package metrics holds sandboxd's Prometheus metrics, which the session,
// capacity and sandbox packages each add to.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are sandboxd's Prometheus metrics.
type Metrics struct {
	execs      *prometheus.HistogramVec
	starts     *prometheus.HistogramVec
	startFails prometheus.Counter
	poolHits   prometheus.Counter
	reaps      prometheus.Counter
	reg        prometheus.Registerer
}

// New registers sandboxd's metrics on reg (nil: not registered).
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		execs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "codeexec_sandbox_exec_seconds",
			Help:    "Wall-clock time of run_python executions, by status.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"status"}),
		starts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "codeexec_sandbox_start_seconds",
			Help: "Time to start a sandbox until its agent is ready, for a session that waits on it or for the warm pool " +
				"(whose starts may wait for a cheaper way, such as a fork server that is starting).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}, []string{"for"}),
		startFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "codeexec_sandbox_start_failures_total",
			Help: "Sandboxes that failed to start.",
		}),
		poolHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "codeexec_sandbox_pool_hits_total",
			Help: "Sandboxes taken ready from the warm pool.",
		}),
		reaps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "codeexec_sandbox_sessions_reaped_total",
			Help: "Sessions destroyed after being idle.",
		}),
		reg: reg,
	}
	// Both series exist from the start, so that a query over sessions'
	// starts reads zero, not nothing, while the pool serves every session.
	m.starts.WithLabelValues(startFor(false))
	m.starts.WithLabelValues(startFor(true))
	if reg != nil {
		reg.MustRegister(m.execs, m.starts, m.startFails, m.poolHits, m.reaps)
	}
	return m
}

// SessionsFunc registers the gauge of live sessions, which f reads.
func (m *Metrics) SessionsFunc(f func() int) {
	m.gaugeFunc("codeexec_sandbox_sessions", "Live sandbox sessions.", f)
}

// PoolFunc registers the gauge of the warm pool, which f reads.
func (m *Metrics) PoolFunc(f func() int) {
	m.gaugeFunc("codeexec_sandbox_warm_pool", "Ready sandboxes waiting in the warm pool.", f)
}

// gaugeFunc registers a gauge that reads f, when there is a registry.
func (m *Metrics) gaugeFunc(name, help string, f func() int) {
	if m.reg == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f()) }))
}

// Exec observes one exec that ended with status ("ok", "error", ...).
func (m *Metrics) Exec(status string, d time.Duration) {
	m.execs.WithLabelValues(status).Observe(d.Seconds())
}

// Started observes one sandbox start, for the pool (warm) or a session.
func (m *Metrics) Started(warm bool, d time.Duration) {
	m.starts.WithLabelValues(startFor(warm)).Observe(d.Seconds())
}

// startFor is the start histogram's "for" label: what the start was for.
func startFor(warm bool) string {
	if warm {
		return "pool"
	}
	return "session"
}

// StartFailed counts a sandbox that failed to start.
func (m *Metrics) StartFailed() { m.startFails.Inc() }

// PoolHit counts a sandbox taken from the warm pool.
func (m *Metrics) PoolHit() { m.poolHits.Inc() }

// Reaped counts a session whose sandbox was stopped for being idle or to
// make room.
func (m *Metrics) Reaped() { m.reaps.Inc() }
