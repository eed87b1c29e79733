// Package wordvec maps lowercase words to vectors that point the same way
// for words that software documentation uses alike ("repo" and
// "repository"), and holds the vector arithmetic the search's dense rerank
// needs.
//
// Its data, vectors.bin, is written by tools/vecgen (scripts/vectors.sh):
// word vectors trained on software documentation that ships in Debian.
// VECTORS-NOTICE names the sources and their licences; docs/SEARCH.md says
// how the file is made.
package wordvec

import (
	_ "embed"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/binfile"
)

// data is vectors.bin. It is parsed once, on first use.
//
//go:embed vectors.bin
var data string

// Vectors maps lowercase words to unit-direction vectors of signed bytes:
// Dims bytes each, in the order of the sorted words, which number the rows.
type Vectors struct {
	words []string // sorted; slices of the parsed data
	dims  int
	data  string // len(words)*dims signed bytes
	norm  []float32
	size  int // of the parsed data
}

// Embedded returns the vectors of vectors.bin, which every caller shares.
var Embedded = binfile.Once(Parse, data)

// Parse reads a vectors file as vecgen writes it. The words and vectors
// are slices of data.
func Parse(data string) (*Vectors, error) {
	r, err := binfile.NewReader("vectors", "cxvec1\n", data)
	if err != nil {
		return nil, err
	}
	next := func() (int, error) {
		v, err := r.Uvarint()
		if err != nil || v > math.MaxInt32 {
			return 0, fmt.Errorf("vectors: truncated")
		}
		return int(v), nil
	}
	n, err := next()
	if err != nil {
		return nil, err
	}
	d, err := next()
	if err != nil || d == 0 {
		return nil, fmt.Errorf("vectors: bad dimensions")
	}
	v := &Vectors{words: make([]string, n), dims: d, size: len(data)}
	for i := range v.words {
		if v.words[i], err = r.String("word"); err != nil {
			return nil, err
		}
		if i > 0 && v.words[i] <= v.words[i-1] {
			return nil, fmt.Errorf("vectors: words out of order at %q", v.words[i])
		}
	}
	if r.Len() != n*d {
		return nil, fmt.Errorf("vectors: %d bytes of vectors, want %d", r.Len(), n*d)
	}
	p := r.Rest()
	v.data = p
	v.norm = make([]float32, n)
	for i := range v.norm {
		var s float32
		for _, b := range []byte(p[i*d : i*d+d]) {
			s += float32(int8(b)) * float32(int8(b))
		}
		if s > 0 {
			v.norm[i] = float32(1 / math.Sqrt(float64(s)))
		}
	}
	return v, nil
}

// Dims is the length of every vector.
func (v *Vectors) Dims() int { return v.dims }

// Find returns the row of word w, or -1.
func (v *Vectors) Find(w string) int32 {
	i, ok := slices.BinarySearch(v.words, w)
	if !ok {
		return -1
	}
	return int32(i)
}

// AddTo adds weight times row i's unit vector to dst, which is Dims long.
func (v *Vectors) AddTo(dst []float32, i int32, weight float32) {
	w := weight * v.norm[i]
	row := v.data[int(i)*v.dims : int(i)*v.dims+v.dims]
	for x := range dst {
		dst[x] += w * float32(int8(row[x]))
	}
}

// Stats are the sizes of a set of vectors, for reports.
type Stats struct {
	Words, Dims int
	// FileBytes is the size of the parsed file.
	FileBytes int
	// HeapBytes is what the vectors hold on the heap besides the file,
	// which their words and components point into.
	HeapBytes int
}

// Stats returns the vectors' sizes.
func (v *Vectors) Stats() Stats {
	return Stats{
		Words:     len(v.words),
		Dims:      v.dims,
		FileBytes: v.size,
		HeapBytes: len(v.words)*int(unsafe.Sizeof("")) + 4*len(v.norm),
	}
}

// Unitize scales v to unit length and reports whether it was non-zero.
func Unitize(v []float32) bool {
	var s float32
	for _, x := range v {
		s += x * x
	}
	if s == 0 {
		return false
	}
	inv := float32(1 / math.Sqrt(float64(s)))
	for i := range v {
		v[i] *= inv
	}
	return true
}

// Dot is the inner product of two vectors of the same length.
func Dot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
