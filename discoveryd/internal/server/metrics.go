package server

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/codeexec/codeexec/discoveryd/internal/upstream"
)

// metrics are discoveryd's Prometheus collectors. They exist whether or
// not they are registered, so the handlers never check.
type metrics struct {
	calls  *prometheus.HistogramVec
	search *prometheus.HistogramVec
	spared *prometheus.CounterVec
}

func newMetrics() *metrics {
	// One line per collector: name, help, then buckets and labels.
	return &metrics{
		calls:  prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "codeexec_discovery_tool_call_seconds", Help: callsHelp, Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14)}, []string{"server", "outcome"}),
		search: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "codeexec_discovery_search_seconds", Help: searchHelp, Buckets: prometheus.ExponentialBuckets(0.0001, 3, 12)}, []string{"scope"}),
		spared: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "codeexec_discovery_schema_tokens_spared_total", Help: sparedHelp}, []string{"rpc"}),
	}
}

// The collectors' help texts.
const (
	callsHelp  = "Upstream MCP tool calls by server and outcome (ok, tool_error, unknown, timeout, crashed, start_failed, rejected, invalid, error)."
	searchHelp = "SearchTools latency, including indexing servers not listed yet; scope is all or servers."
	sparedHelp = "Estimated model tokens not spent because a search or docs answer replaced listing every tool schema: (bytes of all known tool definitions - bytes answered) / 4."
)

// register adds the collectors to reg.
func (m *metrics) register(reg prometheus.Registerer) error {
	return errors.Join(reg.Register(m.calls), reg.Register(m.search), reg.Register(m.spared))
}

// observeCall records one CallTool.
func (m *metrics) observeCall(server string, start time.Time, resp interface{ GetResultJson() string }, err error) {
	outcome := "ok"
	switch {
	case err != nil:
		outcome = callOutcome(err)
	case strings.Contains(resp.GetResultJson(), `"isError":true`):
		outcome = "tool_error"
	}
	m.calls.WithLabelValues(server, outcome).Observe(time.Since(start).Seconds())
}

func callOutcome(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{upstream.ErrUnknownServer, "unknown"}, {upstream.ErrUnknownTool, "unknown"},
		{upstream.ErrTimeout, "timeout"}, {upstream.ErrCrashed, "crashed"},
		{upstream.ErrStartFailed, "start_failed"}, {upstream.ErrRejected, "rejected"},
		{errInvalid, "invalid"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "error"
}

// spare counts the tokens a docs answer saved against listing every
// visible tool's full definition. Four bytes per token is the usual rough
// average for English and JSON; the counter is an estimate, not a bill.
// It runs after the answer is sent.
func (s *Server) spare(rpc, tenant string, answer proto.Message) {
	all := 0
	for _, name := range s.visibleNames(tenant) {
		tools, ok := s.mgr.CachedTools(name)
		if !ok {
			continue
		}
		for _, t := range tools {
			b, err := json.Marshal(t)
			if err == nil {
				all += len(b)
			}
		}
	}
	if saved := all - proto.Size(answer); saved > 0 {
		s.metrics.spared.WithLabelValues(rpc).Add(float64(saved) / 4)
	}
}
