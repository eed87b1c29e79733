package search

import (
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/codeexec/codeexec/discoveryd/internal/embed"
	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/fuzzy"
	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/lexicon"
	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/porter"
	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/wordvec"
)

// Fields of a document, each with its own weight and length normalisation.
const (
	fieldName       = iota // tool name and tool alias
	fieldServer            // server name and server alias
	fieldDesc              // description
	fieldParam             // parameter names
	fieldParamText         // parameter descriptions
	fieldServerDesc        // the server's description, shared by its tools
	numFields
)

// BM25F parameters. A tool's name says what it does more reliably than its
// description, which is more reliable than its parameters.
var (
	fieldWeight = [numFields]float64{3.0, 1.5, 1.0, 0.7, 0.6, 0.3}
	fieldB      = [numFields]float64{0.3, 0.3, 0.75, 0.5, 0.75, 0.75}
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
	name   bool // the term is in the tool's name
}

// termFreq counts one term's occurrences in each field of one document.
type termFreq struct {
	term int32
	tf   [numFields]uint16
}

// Index is an immutable search index over tool documents. It is safe for
// concurrent use by multiple goroutines.
type Index struct {
	docs     []Doc
	terms    map[string]int32   // stemmed term → term id
	postings [][]posting        // by term id
	idf      []float32          // by term id
	nameLen  []uint8            // distinct words in each tool's name
	words    map[string]int32   // lowercase surface word → term id
	vocab    *fuzzy.Index       // surface words, for typo matching
	wordTerm []int32            // fuzzy word id → term id
	names    map[string][]int32 // lowercase tool name → docs
	exact    map[string][]int32 // lowercase tool alias, where it differs → docs
	loose    map[string][]int32 // squashed tool name, bare and after the server's → docs
	lexTerm  []int32            // lexicon entry → term id, or -1
	fields   [][]termFields     // by doc, sorted by term: where each term occurs
	surface  []string           // by term id: its shortest word, to explain hits
	docVec   []float32          // by doc, dims each: the direction of its words' vectors
	model    *embed.Model       // the sentence model's distillation, or nil
	sem      []float32          // by doc, model.Dims() each: its unit vector by the model
	semBits  []uint64           // by doc: the signs of sem's components (semantic.go)
	pool     sync.Pool          // *scratch
}

// NewIndex builds an index over a copy of docs, ranking by words alone.
// Hits point into that copy.
func NewIndex(docs []Doc) *Index { return NewIndexWith(docs, Options{}) }

// NewIndexWith builds an index over a copy of docs with opts.
func NewIndexWith(docs []Doc, opts Options) *Index {
	ix := &Index{
		docs:  append([]Doc(nil), docs...),
		terms: map[string]int32{},
		words: map[string]int32{},
		names: map[string][]int32{},
		exact: map[string][]int32{},
		loose: map[string][]int32{},
	}
	n := len(ix.docs)
	ix.pool.New = func() any { return newScratch(n, opts.Model) }
	if opts.Model != nil {
		ix.model = opts.Model
		ix.embedDocs(opts.Model)
	}

	ix.nameLen = make([]uint8, n)
	ix.fields = make([][]termFields, n)
	docTerms := make([][]termFreq, n)
	lengths := make([][numFields]float64, n)
	var totals [numFields]float64
	var buf []string
	slot := map[int32]int{} // term → index in the current doc's termFreq slice
	wv := wordvec.Embedded()
	wordRow := map[string]int32{} // surface word → vector row, or -1
	// The words of every document that have a vector, document after
	// document: doc i's are vw[vwEnd[i-1]:vwEnd[i]].
	var vw []vecWord
	vwEnd := make([]int, n)
	for i := range ix.docs {
		d := &ix.docs[i]
		var tfs []termFreq
		clear(slot)
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
				if vecFieldWeight[f] > 0 && !stopwords[w] {
					row, ok := wordRow[w]
					if !ok {
						row = wv.Find(w)
						wordRow[w] = row
					}
					if row >= 0 {
						vw = append(vw, vecWord{uint32(row)<<3 | uint32(f), id})
					}
				}
				k, ok := slot[id]
				if !ok {
					k = len(tfs)
					slot[id] = k
					tfs = append(tfs, termFreq{term: id})
				}
				if tfs[k].tf[f] < math.MaxUint16 {
					tfs[k].tf[f]++
				}
			}
			lengths[i][f] = float64(len(buf))
			totals[f] += float64(len(buf))
		}
		docTerms[i] = tfs
		vwEnd[i] = len(vw)
		ix.fields[i] = fieldsOf(tfs)
		ix.nameLen[i] = uint8(min(nameWords(d.Tool), math.MaxUint8))
		ix.addNames(int32(i), d)
	}

	var avg [numFields]float64
	for f := range avg {
		avg[f] = max(totals[f]/float64(max(n, 1)), 1)
	}
	df := make([]int, len(ix.terms))
	for _, tfs := range docTerms {
		for _, t := range tfs {
			df[t.term]++
		}
	}
	ix.postings = make([][]posting, len(ix.terms))
	ix.idf = make([]float32, len(ix.terms))
	for id := range ix.postings {
		ix.postings[id] = make([]posting, 0, df[id])
		ix.idf[id] = float32(math.Log(1 + (float64(n)-float64(df[id])+0.5)/(float64(df[id])+0.5)))
	}
	for i, tfs := range docTerms {
		for _, t := range tfs {
			idf := float64(ix.idf[t.term])
			var x float64
			for f := range numFields {
				if t.tf[f] == 0 {
					continue
				}
				norm := 1 - fieldB[f] + fieldB[f]*lengths[i][f]/avg[f]
				x += fieldWeight[f] * float64(t.tf[f]) / norm
			}
			w := idf * x * (k1 + 1) / (k1 + x)
			ix.postings[t.term] = append(ix.postings[t.term], posting{doc: int32(i), weight: float32(w), name: t.tf[fieldName] > 0})
		}
	}
	// Postings were filled in document order because docTerms is iterated
	// by index; keep them so for deterministic tie-breaking.

	// Each document's vector: its words' vectors, each weighted by its
	// field and its term's idf, summed and scaled to unit length.
	dims := wv.Dims()
	ix.docVec = make([]float32, n*dims)
	for i, end := range vwEnd {
		v := ix.docVec[i*dims : i*dims+dims]
		begin := 0
		if i > 0 {
			begin = vwEnd[i-1]
		}
		for _, w := range vw[begin:end] {
			wv.AddTo(v, int32(w.rowField>>3), vecFieldWeight[w.rowField&7]*ix.idf[w.term])
		}
		wordvec.Unitize(v)
	}

	surface := make([]string, 0, len(ix.words))
	ix.wordTerm = make([]int32, 0, len(ix.words))
	ix.surface = make([]string, len(ix.terms))
	for w, id := range ix.words {
		surface = append(surface, w)
		ix.wordTerm = append(ix.wordTerm, id)
		if cur := ix.surface[id]; cur == "" || len(w) < len(cur) || (len(w) == len(cur) && w < cur) {
			ix.surface[id] = w
		}
	}
	ix.vocab = fuzzy.New(surface)

	lx := lexicon.Embedded()
	ix.lexTerm = make([]int32, lx.Len())
	for i := range ix.lexTerm {
		ix.lexTerm[i] = -1
	}
	for t, id := range ix.terms {
		if k := lx.Find(t); k >= 0 {
			ix.lexTerm[k] = id
		}
	}
	// A query's stopwords are ignored, so no other word may stand for one.
	for w := range stopwords {
		if k := lx.Find(porter.Stem(w)); k >= 0 {
			ix.lexTerm[k] = -1
		}
	}
	return ix
}

// vecWord is one word of a document that has a vector: its row in
// the word vectors times 8 plus its field, and its term.
type vecWord struct {
	rowField uint32
	term     int32
}

// vecFieldWeight weighs each field's words in a document's vector.
var vecFieldWeight = [numFields]float32{fieldName: 2, fieldDesc: 1, fieldParam: 0.3, fieldParamText: 0.2}

// docFields returns the texts of each field of d.
func docFields(d *Doc) [numFields][]string {
	return [numFields][]string{
		fieldName:       {d.Tool, d.ToolAlias},
		fieldServer:     {d.Server, d.ServerAlias},
		fieldDesc:       {d.Description},
		fieldParam:      d.Params,
		fieldParamText:  {d.ParamText},
		fieldServerDesc: {d.ServerDescription},
	}
}

// termID returns the id of the stem of word w, adding both if new.
func (ix *Index) termID(w string) int32 {
	if id, ok := ix.words[w]; ok {
		return id
	}
	t := porter.Stem(w)
	id, ok := ix.terms[t]
	if !ok {
		id = int32(len(ix.terms))
		ix.terms[t] = id
	}
	ix.words[w] = id
	return id
}

// addNames records the spellings under which doc i is an exact match.
// Server-qualified spellings are resolved at query time (see qualified).
func (ix *Index) addNames(i int32, d *Doc) {
	add := func(m map[string][]int32, k string) {
		if k == "" {
			return
		}
		ids := m[k]
		if len(ids) > 0 && ids[len(ids)-1] == i {
			return
		}
		m[k] = append(ids, i)
	}
	add(ix.names, strings.ToLower(d.Tool))
	if a := strings.ToLower(d.ToolAlias); a != strings.ToLower(d.Tool) {
		add(ix.exact, a)
	}
	tool := squash(d.Tool)
	add(ix.loose, tool)
	add(ix.loose, squash(d.Server)+tool)
	if sa := squash(d.ServerAlias); sa != squash(d.Server) {
		add(ix.loose, sa+tool)
	}
}

// nameWords counts the distinct stems of a tool name's words, leaving out
// the whole of a camelCase run that was also split into its humps.
func nameWords(tool string) int {
	var stems []string
	for _, run := range appendRuns(nil, tool) {
		parts := appendRun(nil, run)
		if len(parts) > 1 {
			parts = parts[:len(parts)-1]
		}
		for _, p := range parts {
			if t := porter.Stem(p); !slices.Contains(stems, t) {
				stems = append(stems, t)
			}
		}
	}
	return len(stems)
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
