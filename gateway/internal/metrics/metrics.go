// Package metrics holds the gateway's Prometheus collectors. They exist
// whether or not they are registered, so that callers never check.
package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/codeexec/codeexec/gateway/internal/bodylimit"
	"github.com/codeexec/codeexec/gateway/internal/quota"
)

// Reasons an HTTP request is refused before MCP sees it, the labels of
// Denied.
const (
	DeniedMissingToken = "missing_token"
	DeniedInvalidToken = "invalid_token"
	DeniedOrigin       = "origin"
	DeniedSession      = "session"
)

// Metrics are the gateway's own collectors.
type Metrics struct {
	// Calls times run_python calls by result status.
	Calls *prometheus.HistogramVec
	// Denied counts HTTP requests refused by the guard, by reason.
	Denied *prometheus.CounterVec
	// Quota counts calls refused by a tenant quota, by limit.
	Quota *prometheus.CounterVec
	// BodyRefused counts HTTP request bodies refused before MCP, by the
	// bound they passed (bodylimit.AllRefusals).
	BodyRefused *prometheus.CounterVec
}

// New makes unregistered collectors.
func New() *Metrics {
	// One line per collector: name, help, then buckets and labels.
	return &Metrics{
		Calls:  prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "codeexec_gateway_tool_call_seconds", Help: callsHelp, Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14)}, []string{"status"}),
		Denied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "codeexec_gateway_http_denied_total", Help: deniedHelp}, []string{"reason"}),
		Quota:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "codeexec_gateway_quota_refusals_total", Help: "Calls refused by a per-tenant quota, by limit."}, []string{"limit"}),
		BodyRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "codeexec_gateway_http_body_refusals_total",
			Help: "HTTP request bodies refused before MCP, by bound: request, outside_string, tenant_in_flight, total_in_flight, read_timeout."}, []string{"bound"}),
	}
}

// The longer help texts.
const (
	callsHelp  = "run_python calls as the MCP client sees them, by result status (success, error, timeout, validation_error, refused)."
	deniedHelp = "HTTP requests refused before MCP: reason is missing_token, invalid_token, origin or session."
)

// Register adds the collectors to reg, with gauges that read the calls in
// flight and the routed sessions from the given functions.
func (m *Metrics) Register(reg prometheus.Registerer, inFlight, sessions func() int) error {
	// Every known series exists from the start, at zero, so that rates
	// and dashboards see them before the first refusal.
	for _, l := range quota.AllLimits {
		m.Quota.WithLabelValues(l)
	}
	for _, r := range []string{DeniedMissingToken, DeniedInvalidToken, DeniedOrigin, DeniedSession} {
		m.Denied.WithLabelValues(r)
	}
	for _, b := range bodylimit.AllRefusals {
		m.BodyRefused.WithLabelValues(b)
	}
	return errors.Join(reg.Register(m.Calls), reg.Register(m.Denied), reg.Register(m.Quota), reg.Register(m.BodyRefused),
		reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "codeexec_gateway_calls_in_flight",
			Help: "run_python calls running now.",
		}, func() float64 { return float64(inFlight()) })),
		reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "codeexec_gateway_sessions",
			Help: "MCP sessions (per tenant) the gateway routes to a sandbox session.",
		}, func() float64 { return float64(sessions()) })))
}

// ObserveCall records one run_python call that began at start.
func (m *Metrics) ObserveCall(status string, start time.Time) {
	m.Calls.WithLabelValues(status).Observe(time.Since(start).Seconds())
}
