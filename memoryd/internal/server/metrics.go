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
	quotaRefusals *prometheus.CounterVec
}

// NewMetrics makes unregistered collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		// From a cached read (~10µs) to a slow fsync (~1s).
		opSeconds:     prometheus.NewHistogramVec(histogram("op_duration_seconds", opHelp, prometheus.ExponentialBuckets(10e-6, 3, 12)), []string{"op", "code"}),
		commitWrites:  prometheus.NewHistogram(histogram("commit_writes", commitWritesHelp, prometheus.ExponentialBuckets(1, 2, 9))),
		commitSeconds: prometheus.NewHistogram(histogram("commit_duration_seconds", "Duration of one group commit, fsync included.", prometheus.ExponentialBuckets(50e-6, 2, 14))),
		quotaRefusals: newQuotaRefusals(),
	}
}

// newQuotaRefusals counts writes refused at a tenant's quota, by quota,
// every series present from the start.
func newQuotaRefusals() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "codeexec", Subsystem: "memoryd", Name: "quota_refusals_total",
		Help: "Writes refused because their tenant was at a quota (memory_keys, memory_bytes, checkpoint_bytes)."}, []string{"quota"})
	for _, q := range []string{QuotaMemoryKeys, QuotaMemoryBytes, QuotaCheckpointBytes} {
		c.WithLabelValues(q)
	}
	return c
}

const (
	opHelp           = "Latency of memoryd operations (memory.save, tool.list, ...) by gRPC status code."
	commitWritesHelp = "Writes carried by one group commit (one bbolt transaction, one fsync pair)."
)

// histogram names a histogram codeexec_memoryd_<name>.
func histogram(name, help string, buckets []float64) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Namespace: "codeexec", Subsystem: "memoryd", Name: name, Help: help, Buckets: buckets}
}

// ObserveCommit records one group commit; pass it as the store's OnCommit.
func (m *Metrics) ObserveCommit(writes int, d time.Duration) {
	m.commitWrites.Observe(float64(writes))
	m.commitSeconds.Observe(d.Seconds())
}

// Collectors returns the collectors to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.opSeconds, m.commitWrites, m.commitSeconds, m.quotaRefusals}
}
