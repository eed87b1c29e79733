package search

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// lexiconData is written by internal/lexgen (scripts/lexicon.sh) from
// WordNet 3.0 and GloVe word vectors; LEXICON-NOTICE holds their licences
// and docs/SEARCH.md says how it is made. It is parsed once, on first use.
//
//go:embed lexicon.bin
var lexiconData string

// lexicon relates English word stems, and phrases of stems ("get rid of"),
// to the stems of words that mean the same or nearly so, each with a
// weight in (0, 1].
type lexicon struct {
	keys  []string // sorted; slices of lexiconData
	start []uint32 // key i's relations are rels[start[i]:start[i+1]]
	rels  []uint32 // target key << 8 | weight × 255
	// common are frequent English words, sorted: a query word among them
	// is not a misspelling of a word in the index.
	common []string
}

// maxPhrase is the most words an entry of the lexicon spans.
const maxPhrase = 3

var theLexicon = sync.OnceValue(func() *lexicon {
	lx, err := parseLexicon(lexiconData)
	if err != nil {
		panic(err) // the embedded file is generated and tested
	}
	return lx
})

func parseLexicon(data string) (*lexicon, error) {
	const magic = "cxlex1\n"
	if !strings.HasPrefix(data, magic) {
		return nil, fmt.Errorf("lexicon: bad header")
	}
	p := data[len(magic):]
	next := func() (uint64, error) {
		v, n := binary.Uvarint([]byte(p[:min(len(p), binary.MaxVarintLen64)]))
		if n <= 0 {
			return 0, fmt.Errorf("lexicon: truncated")
		}
		p = p[n:]
		return v, nil
	}
	n, err := next()
	if err != nil {
		return nil, err
	}
	str := func() (string, error) {
		l, err := next()
		if err != nil || l > uint64(len(p)) {
			return "", fmt.Errorf("lexicon: truncated string")
		}
		s := p[:l]
		p = p[l:]
		return s, nil
	}
	lx := &lexicon{keys: make([]string, n), start: make([]uint32, n+1)}
	for i := range lx.keys {
		if lx.keys[i], err = str(); err != nil {
			return nil, err
		}
	}
	for i := range lx.keys {
		c, err := next()
		if err != nil {
			return nil, err
		}
		for range c {
			to, err := next()
			if err != nil || to >= n || len(p) == 0 {
				return nil, fmt.Errorf("lexicon: bad relation of %q", lx.keys[i])
			}
			lx.rels = append(lx.rels, uint32(to)<<8|uint32(p[0]))
			p = p[1:]
		}
		lx.start[i+1] = uint32(len(lx.rels))
	}
	nc, err := next()
	if err != nil || nc > uint64(len(p)) {
		return nil, fmt.Errorf("lexicon: bad common word count")
	}
	lx.common = make([]string, nc)
	for i := range lx.common {
		if lx.common[i], err = str(); err != nil {
			return nil, err
		}
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("lexicon: %d trailing bytes", len(p))
	}
	return lx, nil
}

// find returns the number of entry key, or -1.
func (lx *lexicon) find(key string) int32 {
	i, ok := slices.BinarySearch(lx.keys, key)
	if !ok {
		return -1
	}
	return int32(i)
}

// isCommon reports whether the lowercase word w is a frequent English word.
func (lx *lexicon) isCommon(w string) bool {
	_, ok := slices.BinarySearch(lx.common, w)
	return ok
}

// related returns entry i's relations, strongest first: target<<8|weight.
func (lx *lexicon) related(i int32) []uint32 {
	return lx.rels[lx.start[i]:lx.start[i+1]]
}
