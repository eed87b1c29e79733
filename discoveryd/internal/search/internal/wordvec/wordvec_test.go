package wordvec

import (
	"encoding/binary"
	"testing"
)

// cosine is the cosine of two words' embedded vectors.
func cosine(t *testing.T, a, b string) float32 {
	t.Helper()
	wv := Embedded()
	va, vb := make([]float32, wv.dims), make([]float32, wv.dims)
	for _, x := range []struct {
		w string
		v []float32
	}{{a, va}, {b, vb}} {
		row := wv.Find(x.w)
		if row < 0 {
			t.Fatalf("no vector for %q", x.w)
		}
		wv.AddTo(x.v, row, 1)
	}
	return Dot(va, vb)
}

func TestVectorsNeighbours(t *testing.T) {
	t.Parallel()
	wv := Embedded()
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

func TestParseRejects(t *testing.T) {
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
	v, err := Parse(good([]string{"a", "b"}, 2, "\x7f\x00\x00\x81"))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 2)
	v.AddTo(got, v.Find("b"), 1)
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
		if _, err := Parse(data); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
