package search

import (
	"math"

	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/fuzzy"
	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/lexicon"
	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/wordvec"
	"github.com/codeexec/codeexec/internal/porter"
)

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
	ix.useSemantic(opts.Semantic)
	ix.pending = opts.Pending
	dims := 0
	if ix.semantic != nil {
		dims = ix.semantic.Dims
	}
	ix.pool.New = func() any { return newScratch(n, dims) }
	ix.nameLen = make([]uint8, n)
	ix.fields = make([][]termFields, n)
	b := newBuilder(n)
	for i := range ix.docs {
		b.addDoc(ix, i)
	}
	ix.buildPostings(b)
	ix.buildDocVectors(b)
	ix.buildVocab()
	ix.buildLexicon()
	return ix
}

// builder holds what NewIndex gathers from the documents before it
// weighs them.
type builder struct {
	docTerms [][]termFreq
	lengths  [][numFields]float64
	totals   [numFields]float64
	buf      []string
	slot     map[int32]int // term → index in the current doc's termFreq slice
	wv       *wordvec.Vectors
	wordRow  map[string]int32 // surface word → vector row, or -1
	// The words of every document that have a vector, document after
	// document: doc i's are vw[vwEnd[i-1]:vwEnd[i]].
	vw    []vecWord
	vwEnd []int
}

func newBuilder(n int) *builder {
	return &builder{
		docTerms: make([][]termFreq, n),
		lengths:  make([][numFields]float64, n),
		slot:     map[int32]int{},
		wv:       wordvec.Embedded(),
		wordRow:  map[string]int32{},
		vwEnd:    make([]int, n),
	}
}

// addDoc counts the terms of document i in each field and notes its
// words that have vectors.
func (b *builder) addDoc(ix *Index, i int) {
	d := &ix.docs[i]
	var tfs []termFreq
	clear(b.slot)
	for f, text := range docFields(d) {
		words := b.fieldWords(d, f, text)
		for _, w := range words {
			id := ix.termID(w)
			b.noteVector(w, f, id)
			k, ok := b.slot[id]
			if !ok {
				k = len(tfs)
				b.slot[id] = k
				tfs = append(tfs, termFreq{term: id})
			}
			if tfs[k].tf[f] < math.MaxUint16 {
				tfs[k].tf[f]++
			}
		}
		b.lengths[i][f] = float64(len(words))
		b.totals[f] += float64(len(words))
	}
	b.docTerms[i] = tfs
	b.vwEnd[i] = len(b.vw)
	ix.fields[i] = fieldsOf(tfs)
	ix.nameLen[i] = uint8(min(nameWords(d.Tool), math.MaxUint8))
	ix.addNames(int32(i), d)
}

// fieldWords returns the words of field f of d, in b's buffer.
func (b *builder) fieldWords(d *Doc, f int, text []string) []string {
	b.buf = b.buf[:0]
	for _, t := range text {
		b.buf = appendWords(b.buf, t)
	}
	if f == fieldName || f == fieldServer {
		b.buf = dedupe(b.buf) // name and alias mostly repeat each other
	}
	if f == fieldName {
		if s := squash(d.Tool); s != "" {
			b.buf = append(b.buf, s)
		}
	}
	return b.buf
}

// noteVector notes word w of field f, of term id, when the field counts
// in the document's vector and the word has one.
func (b *builder) noteVector(w string, f int, id int32) {
	if vecFieldWeight[f] <= 0 || stopwords[w] {
		return
	}
	row, ok := b.wordRow[w]
	if !ok {
		row = b.wv.Find(w)
		b.wordRow[w] = row
	}
	if row >= 0 {
		b.vw = append(b.vw, vecWord{uint32(row)<<3 | uint32(f), id})
	}
}

// buildPostings weighs each term of each document by BM25F and files it
// under the term, in document order, which keeps ties deterministic.
func (ix *Index) buildPostings(b *builder) {
	n := len(ix.docs)
	var avg [numFields]float64
	for f := range avg {
		avg[f] = max(b.totals[f]/float64(max(n, 1)), 1)
	}
	df := make([]int, len(ix.terms))
	for _, tfs := range b.docTerms {
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
	for i, tfs := range b.docTerms {
		for _, t := range tfs {
			idf := float64(ix.idf[t.term])
			var x float64
			for f := range numFields {
				if t.tf[f] == 0 {
					continue
				}
				norm := 1 - fieldB[f] + fieldB[f]*b.lengths[i][f]/avg[f]
				x += fieldWeight[f] * float64(t.tf[f]) / norm
			}
			w := idf * x * (k1 + 1) / (k1 + x)
			ix.postings[t.term] = append(ix.postings[t.term], posting{doc: int32(i), weight: float32(w), name: t.tf[fieldName] > 0})
		}
	}
}

// buildDocVectors gives each document its vector: its words' vectors,
// each weighted by its field and its term's idf, summed and scaled to
// unit length.
func (ix *Index) buildDocVectors(b *builder) {
	dims := b.wv.Dims()
	ix.docVec = make([]float32, len(ix.docs)*dims)
	for i, end := range b.vwEnd {
		v := ix.docVec[i*dims : i*dims+dims]
		begin := 0
		if i > 0 {
			begin = b.vwEnd[i-1]
		}
		for _, w := range b.vw[begin:end] {
			b.wv.AddTo(v, int32(w.rowField>>3), vecFieldWeight[w.rowField&7]*ix.idf[w.term])
		}
		wordvec.Unitize(v)
	}
}

// buildVocab indexes the surface words for typo matching and picks each
// term's shortest word to explain hits with.
func (ix *Index) buildVocab() {
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
}

// buildLexicon maps the lexicon's entries to the index's terms.
func (ix *Index) buildLexicon() {
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
}
