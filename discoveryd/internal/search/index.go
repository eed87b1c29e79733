package search

import (
	"math"
	"strings"
	"sync"
)

// Fields of a document, each with its own weight and length normalisation.
const (
	fieldName      = iota // tool name and tool alias
	fieldServer           // server name and server alias
	fieldDesc             // description
	fieldParam            // parameter names
	fieldParamText        // parameter descriptions
	numFields
)

// BM25F parameters. A tool's name says what it does more reliably than its
// description, which is more reliable than its parameters.
var (
	fieldWeight = [numFields]float64{3.0, 1.5, 1.0, 0.7, 0.3}
	fieldB      = [numFields]float64{0.3, 0.3, 0.75, 0.5, 0.75}
)

const k1 = 1.2

// Rank tiers: an exact name match outranks every scored match.
const (
	tierNone  = 0
	tierLoose = 1 // squashed name ("readfile", "read file") or an identifier token of the query
	tierExact = 2 // whole query equals a tool alias or a server-qualified name
	tierName  = 3 // whole query equals the tool name itself
)

// posting is one document containing a term, with that term's precomputed
// BM25F contribution (idf included) to the document's score.
type posting struct {
	doc    int32
	weight float32
}

// Index is an immutable search index over tool documents. It is safe for
// concurrent use by multiple goroutines.
type Index struct {
	docs     []Doc
	terms    map[string]int32   // stemmed term → term id
	postings [][]posting        // by term id
	words    map[string]int32   // lowercase surface word → term id
	vocab    *fuzzy             // surface words, for typo matching
	wordTerm []int32            // fuzzy word id → term id
	names    map[string][]int32 // lowercase tool name → docs
	exact    map[string][]int32 // lowercase alias or qualified name → docs
	loose    map[string][]int32 // squashed name → docs
	pool     sync.Pool          // *scratch
}

// NewIndex builds an index over a copy of docs. Hits point into that copy.
func NewIndex(docs []Doc) *Index {
	ix := &Index{
		docs:  append([]Doc(nil), docs...),
		terms: map[string]int32{},
		words: map[string]int32{},
		names: map[string][]int32{},
		exact: map[string][]int32{},
		loose: map[string][]int32{},
	}
	n := len(ix.docs)
	ix.pool.New = func() any { return newScratch(n) }

	type tf = [numFields]uint16
	docTerms := make([]map[int32]*tf, n)
	lengths := make([][numFields]float64, n)
	var totals [numFields]float64
	var buf []string
	for i := range ix.docs {
		d := &ix.docs[i]
		counts := map[int32]*tf{}
		for f, text := range docFields(d) {
			buf = buf[:0]
			for _, t := range text {
				buf = appendWords(buf, t)
			}
			if f == fieldName || f == fieldServer {
				buf = dedupe(buf) // name and alias mostly repeat each other
			}
			if f == fieldName {
				if s := squash(d.Tool); s != "" {
					buf = append(buf, s)
				}
			}
			for _, w := range buf {
				id := ix.termID(w)
				c := counts[id]
				if c == nil {
					c = new(tf)
					counts[id] = c
				}
				if c[f] < math.MaxUint16 {
					c[f]++
				}
			}
			lengths[i][f] = float64(len(buf))
			totals[f] += float64(len(buf))
		}
		docTerms[i] = counts
		ix.addNames(int32(i), d)
	}

	var avg [numFields]float64
	for f := range avg {
		avg[f] = max(totals[f]/float64(max(n, 1)), 1)
	}
	df := make([]int, len(ix.terms))
	for _, counts := range docTerms {
		for id := range counts {
			df[id]++
		}
	}
	ix.postings = make([][]posting, len(ix.terms))
	for id := range ix.postings {
		ix.postings[id] = make([]posting, 0, df[id])
	}
	for i, counts := range docTerms {
		for id, c := range counts {
			idf := math.Log(1 + (float64(n)-float64(df[id])+0.5)/(float64(df[id])+0.5))
			var x float64
			for f := range numFields {
				if c[f] == 0 {
					continue
				}
				norm := 1 - fieldB[f] + fieldB[f]*lengths[i][f]/avg[f]
				x += fieldWeight[f] * float64(c[f]) / norm
			}
			w := idf * x * (k1 + 1) / (k1 + x)
			ix.postings[id] = append(ix.postings[id], posting{doc: int32(i), weight: float32(w)})
		}
	}
	// Postings were filled in document order because docTerms is iterated
	// by index; keep them so for deterministic tie-breaking.

	surface := make([]string, 0, len(ix.words))
	ix.wordTerm = make([]int32, 0, len(ix.words))
	for w, id := range ix.words {
		surface = append(surface, w)
		ix.wordTerm = append(ix.wordTerm, id)
	}
	ix.vocab = newFuzzy(surface)
	return ix
}

// docFields returns the texts of each field of d.
func docFields(d *Doc) [numFields][]string {
	return [numFields][]string{
		fieldName:      {d.Tool, d.ToolAlias},
		fieldServer:    {d.Server, d.ServerAlias},
		fieldDesc:      {d.Description},
		fieldParam:     d.Params,
		fieldParamText: {d.ParamText},
	}
}

// termID returns the id of the stem of word w, adding both if new.
func (ix *Index) termID(w string) int32 {
	if id, ok := ix.words[w]; ok {
		return id
	}
	t := stem(w)
	id, ok := ix.terms[t]
	if !ok {
		id = int32(len(ix.terms))
		ix.terms[t] = id
	}
	ix.words[w] = id
	return id
}

// addNames records the spellings under which doc i is an exact match.
func (ix *Index) addNames(i int32, d *Doc) {
	add := func(m map[string][]int32, k string) {
		if k == "" {
			return
		}
		ids := m[k]
		for _, x := range ids {
			if x == i {
				return
			}
		}
		m[k] = append(ids, i)
	}
	add(ix.names, strings.ToLower(d.Tool))
	servers := []string{strings.ToLower(d.Server), strings.ToLower(d.ServerAlias)}
	tools := []string{strings.ToLower(d.Tool), strings.ToLower(d.ToolAlias)}
	for _, t := range tools {
		if t == "" {
			continue
		}
		add(ix.exact, t)
		for _, s := range servers {
			if s == "" {
				continue
			}
			for _, sep := range []string{".", "/", ":", "__"} {
				add(ix.exact, s+sep+t)
			}
			add(ix.exact, "mcp__"+s+"__"+t)
			add(ix.loose, squash(s)+squash(t))
		}
		add(ix.loose, squash(t))
	}
}

// Len is the number of documents in the index.
func (ix *Index) Len() int { return len(ix.docs) }

// dedupe removes repeated words, keeping first occurrences, in place.
func dedupe(ws []string) []string {
	out := ws[:0]
	for i, w := range ws {
		dup := false
		for _, p := range ws[:i] {
			if p == w {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, w)
		}
	}
	return out
}
