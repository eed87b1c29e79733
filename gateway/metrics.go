package gateway

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's Prometheus collectors. They exist whether or
// not they are registered.
type metrics struct {
	calls  *prometheus.HistogramVec
	denied *prometheus.CounterVec
	quota  *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "codeexec_gateway_tool_call_seconds",
			Help:    "run_python calls as the MCP client sees them, by result status (success, error, timeout, validation_error, refused).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"status"}),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "codeexec_gateway_http_denied_total",
			Help: "HTTP requests refused before MCP: reason is missing_token, invalid_token, origin or session.",
		}, []string{"reason"}),
		quota: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "codeexec_gateway_quota_refusals_total",
			Help: "Calls refused by a per-tenant quota, by limit.",
		}, []string{"limit"}),
	}
}

func (m *metrics) register(reg prometheus.Registerer, g *Gateway) error {
	// Every known series exists from the start, at zero, so that rates
	// and dashboards see them before the first refusal.
	for _, l := range []string{LimitSessions, LimitExecs, LimitExecsPerMinute} {
		m.quota.WithLabelValues(l)
	}
	for _, r := range []string{"missing_token", "invalid_token", "origin", "session"} {
		m.denied.WithLabelValues(r)
	}
	return errors.Join(reg.Register(m.calls), reg.Register(m.denied), reg.Register(m.quota),
		reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "codeexec_gateway_calls_in_flight",
			Help: "run_python calls running now.",
		}, func() float64 { return float64(g.calls.inFlight()) })),
		reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "codeexec_gateway_sessions",
			Help: "MCP sessions (per tenant) the gateway routes to a sandbox session.",
		}, func() float64 { return float64(g.sessions.count()) })))
}

func (m *metrics) observe(status string, start time.Time) {
	m.calls.WithLabelValues(status).Observe(time.Since(start).Seconds())
}
