package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds memoryd's own Prometheus collectors. The gRPC interceptors
// already time whole RPCs; op_duration_seconds times the work behind each
// one, labelled by a short op name and the resulting code, and the commit
// histograms show how well concurrent writes share fsyncs.
type Metrics struct {
	opSeconds     *prometheus.HistogramVec
	commitWrites  prometheus.Histogram
	commitSeconds prometheus.Histogram
}

// NewMetrics makes unregistered collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		opSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "codeexec",
			Subsystem: "memoryd",
			Name:      "op_duration_seconds",
			Help:      "Latency of memoryd operations (memory.save, tool.list, ...) by gRPC status code.",
			// From a cached read (~10µs) to a slow fsync (~1s).
			Buckets: prometheus.ExponentialBuckets(10e-6, 3, 12),
		}, []string{"op", "code"}),
		commitWrites: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "codeexec",
			Subsystem: "memoryd",
			Name:      "commit_writes",
			Help:      "Writes carried by one group commit (one bbolt transaction, one fsync pair).",
			Buckets:   prometheus.ExponentialBuckets(1, 2, 9),
		}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "codeexec",
			Subsystem: "memoryd",
			Name:      "commit_duration_seconds",
			Help:      "Duration of one group commit, fsync included.",
			Buckets:   prometheus.ExponentialBuckets(50e-6, 2, 14),
		}),
	}
}

// ObserveCommit records one group commit; pass it as the store's OnCommit.
func (m *Metrics) ObserveCommit(writes int, d time.Duration) {
	m.commitWrites.Observe(float64(writes))
	m.commitSeconds.Observe(d.Seconds())
}

// Collectors returns the collectors to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.opSeconds, m.commitWrites, m.commitSeconds}
}
