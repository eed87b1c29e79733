package memoryd_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

// gather returns the metric families of reg by name.
func gather(tb testing.TB, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	tb.Helper()
	fams, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// meanCommitWrites is the mean number of writes per group commit.
func meanCommitWrites(tb testing.TB, reg *prometheus.Registry) float64 {
	h := gather(tb, reg)["codeexec_memoryd_commit_writes"].GetMetric()[0].GetHistogram()
	return h.GetSampleSum() / float64(h.GetSampleCount())
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := start(t, memoryd.Config{Registerer: reg})
	e.save(t, "", "k", `1`, "")
	_, _ = e.mem.GetMemory(t.Context(), &memoryv1.GetMemoryRequest{Key: "absent"})
	_, _ = e.mem.UpdateMemory(t.Context(), &memoryv1.UpdateMemoryRequest{Key: "k", ValueJson: `2`, ExpectedRevision: 9})

	fams := gather(t, reg)
	got := map[[2]string]uint64{}
	for _, m := range fams["codeexec_memoryd_op_duration_seconds"].GetMetric() {
		var op, code string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "op":
				op = l.GetValue()
			case "code":
				code = l.GetValue()
			}
		}
		got[[2]string{op, code}] = m.GetHistogram().GetSampleCount()
	}
	for _, want := range [][2]string{{"memory.save", "OK"}, {"memory.get", "NotFound"}, {"memory.update", "Aborted"}} {
		if got[want] != 1 {
			t.Errorf("op_duration_seconds%v count = %d, want 1 (all: %v)", want, got[want], got)
		}
	}
	if n := meanCommitWrites(t, reg); n != 1 {
		t.Errorf("mean writes per commit = %v, want 1 for one serial writer", n)
	}
	if c := fams["codeexec_memoryd_commit_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); c != 1 {
		// The stale update fails on the read path and costs no commit.
		t.Errorf("commits = %d, want 1", c)
	}
}

// TestGroupCommitSharesFsyncs checks the mechanism behind the throughput
// figure without timing anything: 16 concurrent writers must share
// commits (one fsync pair each) instead of paying one each.
func TestGroupCommitSharesFsyncs(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := start(t, memoryd.Config{Registerer: reg})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if _, err := e.mem.SaveMemory(t.Context(), &memoryv1.SaveMemoryRequest{Key: fmt.Sprintf("w%d-%d", w, i), ValueJson: `1`}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	n := meanCommitWrites(t, reg)
	t.Logf("mean writes per commit with 16 writers: %.2f", n)
	if n < 5 {
		t.Errorf("mean writes per commit = %.2f with 16 writers; want at least 5", n)
	}
}
