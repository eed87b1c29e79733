// Package lexicon relates English word stems, and phrases of stems ("get
// rid of"), to the stems of words that mean the same or nearly so, each
// with a weight in (0, 1], and knows which words are frequent English.
//
// Its data, lexicon.bin, is written by tools/lexgen (scripts/lexicon.sh) from
// WordNet 3.0 and GloVe word vectors; LEXICON-NOTICE holds their licences
// and docs/SEARCH.md says how it is made.
package lexicon

import (
	_ "embed"
	"fmt"
	"slices"
	"unsafe"

	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/binfile"
)

// data is lexicon.bin. It is parsed once, on first use.
//
//go:embed lexicon.bin
var data string

// Lexicon is a parsed lexicon file. Its entries are numbered in the order
// of their sorted keys.
type Lexicon struct {
	keys  []string // sorted; slices of the parsed data
	start []uint32 // key i's relations are rels[start[i]:start[i+1]]
	rels  []uint32 // target key << 8 | weight × 255
	// common are frequent English words, sorted: a query word among them
	// is not a misspelling of a word in the index.
	common []string
	size   int // of the parsed data
}

// MaxPhrase is the most words an entry of the lexicon spans.
const MaxPhrase = 3

// Embedded returns the lexicon of lexicon.bin, which every caller shares.
var Embedded = binfile.Once(Parse, data)

// Parse reads a lexicon file as lexgen writes it. The lexicon's strings
// are slices of data.
func Parse(data string) (*Lexicon, error) {
	r, err := binfile.NewReader("lexicon", "cxlex1\n", data)
	if err != nil {
		return nil, err
	}
	n, err := r.Uvarint()
	if err != nil {
		return nil, err
	}
	lx := &Lexicon{keys: make([]string, n), start: make([]uint32, n+1), size: len(data)}
	for i := range lx.keys {
		if lx.keys[i], err = r.String("string"); err != nil {
			return nil, err
		}
	}
	for i := range lx.keys {
		c, err := r.Uvarint()
		if err != nil {
			return nil, err
		}
		for range c {
			to, err := r.Uvarint()
			if err != nil || to >= n || r.Len() == 0 {
				return nil, fmt.Errorf("lexicon: bad relation of %q", lx.keys[i])
			}
			lx.rels = append(lx.rels, uint32(to)<<8|uint32(r.Byte()))
		}
		lx.start[i+1] = uint32(len(lx.rels))
	}
	nc, err := r.Uvarint()
	if err != nil || nc > uint64(r.Len()) {
		return nil, fmt.Errorf("lexicon: bad common word count")
	}
	lx.common = make([]string, nc)
	for i := range lx.common {
		if lx.common[i], err = r.String("string"); err != nil {
			return nil, err
		}
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("lexicon: %d trailing bytes", r.Len())
	}
	return lx, nil
}

// Len is the number of entries.
func (lx *Lexicon) Len() int { return len(lx.keys) }

// Key returns entry i's key: a stem, or stems joined by spaces.
func (lx *Lexicon) Key(i int32) string { return lx.keys[i] }

// Find returns the number of entry key, or -1.
func (lx *Lexicon) Find(key string) int32 {
	i, ok := slices.BinarySearch(lx.keys, key)
	if !ok {
		return -1
	}
	return int32(i)
}

// IsCommon reports whether the lowercase word w is a frequent English word.
func (lx *Lexicon) IsCommon(w string) bool {
	_, ok := slices.BinarySearch(lx.common, w)
	return ok
}

// Related returns entry i's relations, strongest first, each the number
// of the related entry shifted left by 8 bits, ORed with the relation's
// weight times 255.
func (lx *Lexicon) Related(i int32) []uint32 {
	return lx.rels[lx.start[i]:lx.start[i+1]]
}

// Stats are the sizes of a lexicon, for reports.
type Stats struct {
	Entries, Relations, CommonWords int
	// FileBytes is the size of the parsed file.
	FileBytes int
	// HeapBytes is what the lexicon holds on the heap besides the file,
	// which its strings point into.
	HeapBytes int
}

// Stats returns the lexicon's sizes.
func (lx *Lexicon) Stats() Stats {
	return Stats{
		Entries:     len(lx.keys),
		Relations:   len(lx.rels),
		CommonWords: len(lx.common),
		FileBytes:   lx.size,
		HeapBytes:   (len(lx.keys)+len(lx.common))*int(unsafe.Sizeof("")) + 4*(len(lx.start)+len(lx.rels)),
	}
}
