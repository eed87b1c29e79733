package search

import "testing"

// TestDenseRerankLiftsParaphrase checks the rerank end to end on a small
// index: a query in other words than the tool's finds it first, where
// BM25F alone ties the three tools on "get" and keeps index order.
func TestDenseRerankLiftsParaphrase(t *testing.T) {
	t.Parallel()
	ix := NewIndex([]Doc{
		{Server: "cloud", Tool: "font_get", Description: "Get a font by ID"},
		{Server: "cloud", Tool: "calendar_get", Description: "Get a calendar by ID"},
		{Server: "cloud", Tool: "instance_get", Description: "Get a virtual machine by ID"},
	})
	res := ix.Search("get my vm", 3)
	if len(res.Hits) == 0 || res.Hits[0].Doc.Tool != "instance_get" {
		t.Fatalf("hits %v, want instance_get first", res.Hits)
	}
}
