package discoveryd_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/codeexec/codeexec/discoveryd"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
)

func TestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := start(t, map[string]any{"fake": fakeServer(t)}, func(c *discoveryd.Config) { c.Registerer = reg })
	ctx := t.Context()
	for _, req := range []*discoveryv1.CallToolRequest{
		{Server: "fake", Tool: "echo", ArgumentsJson: `{"text":"hi"}`},
		{Server: "fake", Tool: "echo", ArgumentsJson: `{"text":"again"}`},
		{Server: "fake", Tool: "fail"},
		{Server: "fake", Tool: "nope"},
		{Server: "not-configured", Tool: "x"},
	} {
		_, _ = e.client.CallTool(ctx, req)
	}
	if _, err := e.client.SearchTools(ctx, &discoveryv1.SearchToolsRequest{Query: "echo text", Limit: 1}); err != nil {
		t.Fatal(err)
	}
	count := func(name string, labels map[string]string) float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			total := 0.0
		metric:
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
						continue metric
					}
				}
				if h := m.GetHistogram(); h != nil {
					total += float64(h.GetSampleCount())
				} else {
					total += m.GetCounter().GetValue()
				}
			}
			return total
		}
		return 0
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"codeexec_discovery_tool_call_seconds", map[string]string{"server": "fake", "outcome": "ok"}, 2},
		{"codeexec_discovery_tool_call_seconds", map[string]string{"server": "fake", "outcome": "tool_error"}, 1},
		{"codeexec_discovery_tool_call_seconds", map[string]string{"server": "fake", "outcome": "unknown"}, 1},
		{"codeexec_discovery_tool_call_seconds", map[string]string{"server": "not-configured"}, 0},
		{"codeexec_discovery_search_seconds", map[string]string{"scope": "all"}, 1},
	} {
		if got := count(tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	// One short summary instead of six full definitions spares tokens;
	// the counter is updated after the answer.
	deadline := time.Now().Add(5 * time.Second)
	for count("codeexec_discovery_schema_tokens_spared_total", map[string]string{"rpc": "SearchTools"}) <= 0 {
		if time.Now().After(deadline) {
			t.Fatal("codeexec_discovery_schema_tokens_spared_total stayed 0 after a search")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
