package session

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

// NewMetrics registers sandboxd's metrics on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
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

func (m *Metrics) sessionsFunc(f func() int) {
	m.gaugeFunc("codeexec_sandbox_sessions", "Live sandbox sessions.", f)
}

func (m *Metrics) poolFunc(f func() int) {
	m.gaugeFunc("codeexec_sandbox_warm_pool", "Ready sandboxes waiting in the warm pool.", f)
}

// gaugeFunc registers a gauge that reads f, when there is a registry.
func (m *Metrics) gaugeFunc(name, help string, f func() int) {
	if m.reg == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f()) }))
}

var statusNames = map[Status]string{StatusOK: "ok", StatusError: "error", StatusTimeout: "timeout", StatusKilled: "killed"}

func (s Status) String() string { return statusNames[s] }

func (m *Metrics) observe(r *Result) {
	m.execs.WithLabelValues(r.Status.String()).Observe(r.Duration.Seconds())
}
func (m *Metrics) started(warm bool, d time.Duration) {
	m.starts.WithLabelValues(startFor(warm)).Observe(d.Seconds())
}

// startFor is the start histogram's "for" label: what the start was for.
func startFor(warm bool) string {
	if warm {
		return "pool"
	}
	return "session"
}
func (m *Metrics) startFailed() { m.startFails.Inc() }
func (m *Metrics) poolHit()     { m.poolHits.Inc() }
func (m *Metrics) reaped()      { m.reaps.Inc() }
