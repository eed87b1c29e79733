package search

import (
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/fuzzy"
	"github.com/codeexec/codeexec/internal/porter"
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
	tierTypo  = 1 // the whole query, squashed, is a misspelling of the tool's squashed name
	tierLoose = 2 // squashed name ("readfile", "read file") or an identifier token of the query
	tierExact = 3 // whole query equals a tool alias or a server-qualified name
	tierName  = 4 // whole query equals the tool name itself
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
	longest  int                // runes of the longest squashed tool name or alias
	lexTerm  []int32            // lexicon entry → term id, or -1
	fields   [][]termFields     // by doc, sorted by term: where each term occurs
	surface  []string           // by term id: its shortest word, to explain hits
	docVec   []float32          // by doc, dims each: the direction of its words' vectors
	semantic *Semantic          // the sentence model's vectors, or nil
	pending  string             // Options.Pending
	sem      []float32          // by doc, semantic.Dims each: its unit vector by the model
	semBits  []uint64           // by doc: the signs of sem's components (semantic.go)
	pool     sync.Pool          // *scratch
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
	ix.longest = max(ix.longest, utf8.RuneCountInString(tool), utf8.RuneCountInString(squash(d.ToolAlias)))
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
