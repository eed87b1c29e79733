package search

import (
	"encoding/binary"
	"testing"
)

// cosine is the cosine of two words' embedded vectors.
func cosine(t *testing.T, a, b string) float32 {
	t.Helper()
	wv := theVectors()
	va, vb := make([]float32, wv.dims), make([]float32, wv.dims)
	for _, x := range []struct {
		w string
		v []float32
	}{{a, va}, {b, vb}} {
		row := wv.find(x.w)
		if row < 0 {
			t.Fatalf("no vector for %q", x.w)
		}
		wv.addTo(x.v, row, 1)
	}
	return dot(va, vb)
}

func TestVectorsNeighbours(t *testing.T) {
	t.Parallel()
	wv := theVectors()
	if wv.dims != 100 || len(wv.words) < 30000 {
		t.Fatalf("%d words of %d dimensions, want 30,000+ of 100", len(wv.words), wv.dims)
	}
	// Words the software documentation uses alike are nearer each other
	// than a word of the same corpus from another topic.
	for _, tt := range []struct{ a, b, far string }{
		{"repo", "repository", "font"},
		{"cert", "certificate", "calendar"},
		{"vm", "virtualmachine", "spreadsheet"},
		{"folder", "directory", "password"},
		{"bucket", "s3", "keyboard"},
	} {
		near, far := cosine(t, tt.a, tt.b), cosine(t, tt.a, tt.far)
		if near <= far+0.2 {
			t.Errorf("cos(%s, %s) = %.2f, not clearly above cos(%s, %s) = %.2f", tt.a, tt.b, near, tt.a, tt.far, far)
		}
	}
}

func TestParseVectorsRejects(t *testing.T) {
	t.Parallel()
	good := func(words []string, dims int, vecs string) string {
		b := []byte("cxvec1\n")
		b = binary.AppendUvarint(b, uint64(len(words)))
		b = binary.AppendUvarint(b, uint64(dims))
		for _, w := range words {
			b = binary.AppendUvarint(b, uint64(len(w)))
			b = append(b, w...)
		}
		return string(b) + vecs
	}
	v, err := parseVectors(good([]string{"a", "b"}, 2, "\x7f\x00\x00\x81"))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 2)
	v.addTo(got, v.find("b"), 1)
	if got[0] != 0 || got[1] > -0.99 {
		t.Errorf("b = %v, want the unit vector (0, -1)", got)
	}
	for name, data := range map[string]string{
		"header":    "cxvec0\n",
		"order":     good([]string{"b", "a"}, 2, "\x01\x01\x01\x01"),
		"short":     good([]string{"a", "b"}, 2, "\x01\x01\x01"),
		"long":      good([]string{"a", "b"}, 2, "\x01\x01\x01\x01\x01"),
		"no dims":   good([]string{"a"}, 0, ""),
		"truncated": good([]string{"abc"}, 1, "")[:10],
		"empty":     "",
	} {
		if _, err := parseVectors(data); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

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
