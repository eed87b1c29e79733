package main

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/codeexec/codeexec/internal/porter"
)

// params are the generator's choices; the defaults are what ships.
type params struct {
	top, rare      int
	k              int
	neighbours     int
	nearMin        float64
	nearSpan       float64 // cosine above nearMin at which a nearest stem weighs fully
	frequent       int
	common         int // words at least this frequent are never taken for misspellings
	maxSenses      int
	senseDecay     float64
	weight         map[string]float64 // by relation kind
	cosLow, cosTop float64            // cosine range over which a WordNet link fades in
}

func defaultParams() params {
	return params{
		top:        30000,
		rare:       200000,
		k:          24,
		neighbours: 24,
		nearMin:    0.6,
		nearSpan:   0.25,
		frequent:   300,
		common:     20000,
		maxSenses:  6,
		senseDecay: 0.7,
		weight: map[string]float64{
			"synonym":  1.0, // same synset
			"form":     1.0, // irregular inflection: "ran" for "run"
			"derived":  0.9, // "deletion" for "delete"
			"similar":  0.7, // verb group, similar adjective, see also
			"broader":  0.6, // hypernym: "remove" for "delete"
			"narrower": 0.5,
			"near":     0.6, // nearest by vector, no WordNet link
		},
		cosLow: 0.15,
		cosTop: 0.5,
	}
}

// lexicon is the generator's output: sorted entries, each a stem or a
// phrase of stems joined by spaces, with related stems.
type lexicon struct {
	keys    []string
	rels    [][]rel
	kinds   [][]string // parallel to rels, for -explain
	common  []string   // frequent words, sorted: never taken for misspellings
	phrases int
}

type rel struct {
	to int32
	w  float32
}

// builder accumulates relations by entry and target stem.
type builder struct {
	p     params
	wn    *wordNet
	vs    *vectors
	vocab map[string]bool      // surface words that may take part
	stem  map[string]string    // surface word → stem
	svec  map[string][]float32 // stem → vector of its most frequent word
	acc   map[string]map[string]link
	anti  map[string]map[string]bool // antonym stems by stem, never related
	// frequent are the stems of the p.frequent most frequent words.
	frequent map[string]bool
	rank     map[string]int // stem → frequency rank of its most frequent word
	cache    string
}

type link struct {
	w    float64
	kind string
}

func build(wn *wordNet, vs *vectors, p params, cache string) *lexicon {
	b := &builder{p: p, wn: wn, vs: vs, vocab: map[string]bool{}, stem: map[string]string{},
		svec: map[string][]float32{}, acc: map[string]map[string]link{}, anti: map[string]map[string]bool{},
		frequent: map[string]bool{}, rank: map[string]int{}, cache: cache}
	for _, w := range vs.words[:min(p.frequent, len(vs.words))] {
		b.frequent[porter.Stem(w)] = true
	}
	for r, w := range vs.words {
		if r < p.top && vs.vec[w] != nil {
			b.vocab[w] = true
		}
	}
	for lemma := range wn.senses {
		if r, ok := vs.rank[lemma]; ok && r < p.rare && vs.vec[lemma] != nil {
			b.vocab[lemma] = true
		}
	}
	// Stems take the vector of their most frequent word ("delete" rather
	// than "deletes").
	best := b.rank
	for w := range b.vocab {
		st := porter.Stem(w)
		b.stem[w] = st
		if r, ok := best[st]; !ok || vs.rank[w] < r {
			best[st] = vs.rank[w]
			b.svec[st] = vs.vec[w]
		}
	}
	for _, w := range sortedKeys(b.vocab) {
		b.addWordNet(b.stem[w], w, 1)
	}
	for _, lemma := range sortedKeys(wn.senses) {
		if key, ok := b.phraseKey(lemma); ok {
			b.addWordNet(key, lemma, 1)
		}
	}
	for _, infl := range sortedKeys(wn.base) {
		if !isWord(infl) {
			continue
		}
		key := porter.Stem(infl)
		for _, base := range wn.base[infl] {
			if b.vocab[base] && porter.Stem(base) != key {
				b.add(key, porter.Stem(base), p.weight["form"], "form")
				b.addWordNet(key, base, p.weight["form"])
			}
		}
	}
	b.addNeighbours()
	return b.finish()
}

// phraseKey turns a multiword WordNet lemma of two or three words
// ("get_rid_of", "turn_off") into its entry: the words' stems joined by
// spaces, as the query's consecutive words are looked up.
func (b *builder) phraseKey(lemma string) (string, bool) {
	parts := strings.Split(lemma, "_")
	if len(parts) < 2 || len(parts) > 3 {
		return "", false
	}
	known := 0
	for i, w := range parts {
		if !isWord(w) {
			return "", false
		}
		if b.vocab[w] {
			known++
		}
		parts[i] = porter.Stem(w)
	}
	if known < len(parts) {
		return "", false
	}
	return strings.Join(parts, " "), true
}

// addWordNet relates entry key to the words WordNet links to lemma's
// senses, each sense weighted by its frequency rank, all scaled by scale.
func (b *builder) addWordNet(key, lemma string, scale float64) {
	for _, s := range b.wn.senses[lemma] {
		if s.rank >= b.p.maxSenses {
			continue
		}
		sw := scale * math.Pow(b.p.senseDecay, float64(s.rank))
		ss := b.wn.synsets[s.key]
		if ss == nil {
			continue
		}
		self := slices.Index(ss.lemmas, lemma) + 1
		for _, l := range ss.lemmas {
			if l != lemma {
				b.addLemma(key, l, sw*b.p.weight["synonym"], "synonym")
			}
		}
		for _, ptr := range ss.ptrs {
			if ptr.src != 0 && ptr.src != self {
				continue
			}
			t := b.wn.synsets[ptr.target]
			if t == nil {
				continue
			}
			targets := t.lemmas
			if ptr.dst > 0 && ptr.dst <= len(t.lemmas) {
				targets = t.lemmas[ptr.dst-1 : ptr.dst]
			}
			var kind string
			switch ptr.sym {
			case "!":
				for _, l := range t.lemmas { // the antonym and its synonyms
					if b.vocab[l] {
						b.antonym(key, b.stem[l])
					}
				}
				continue
			case "+":
				kind = "derived"
			case "@", "@i":
				kind = "broader"
			case "~", "~i":
				kind = "narrower"
			case "$", "&", "^":
				kind = "similar"
			default:
				continue
			}
			for _, l := range targets {
				b.addLemma(key, l, sw*b.p.weight[kind], kind)
			}
		}
	}
}

func (b *builder) antonym(a, z string) {
	if b.anti[a] == nil {
		b.anti[a] = map[string]bool{}
	}
	b.anti[a][z] = true
}

// addLemma relates key to lemma's stem if lemma is a single vocabulary
// word, faded by how far apart their vectors are: a rare sense ("remove"
// for "murder") is usually far.
func (b *builder) addLemma(key, lemma string, w float64, kind string) {
	if !b.vocab[lemma] {
		return
	}
	to := b.stem[lemma]
	if kv := b.keyVec(key); kv != nil {
		c := float64(dot(kv, b.svec[to]))
		w *= clamp((c-b.p.cosLow)/(b.p.cosTop-b.p.cosLow), 0, 1)
	} else {
		w *= 0.5
	}
	b.add(key, to, w, kind)
}

// keyVec is the vector of an entry: its stem's, or the normalised mean of a
// phrase's words' vectors.
func (b *builder) keyVec(key string) []float32 {
	if !strings.Contains(key, " ") {
		return b.svec[key]
	}
	sum := make([]float32, dims)
	n := 0
	for _, st := range strings.Fields(key) {
		if v := b.svec[st]; v != nil && len(st) > 2 {
			for i := range sum {
				sum[i] += v[i]
			}
			n++
		}
	}
	if n == 0 {
		return nil
	}
	var norm float64
	for _, x := range sum {
		norm += float64(x * x)
	}
	inv := float32(1 / math.Sqrt(norm))
	for i := range sum {
		sum[i] *= inv
	}
	return sum
}

func (b *builder) add(key, to string, w float64, kind string) {
	if key == to || w <= 0 {
		return
	}
	m := b.acc[key]
	if m == nil {
		m = map[string]link{}
		b.acc[key] = m
	}
	if w > m[to].w {
		m[to] = link{w, kind}
	}
}

// finish keeps each entry's k strongest relations and numbers the entries.
func (b *builder) finish() *lexicon {
	const minWeight = 0.04
	keep := map[string][]string{}
	for key, m := range b.acc {
		tos := sortedKeys(m)
		tos = slices.DeleteFunc(tos, func(t string) bool { return m[t].w < minWeight || b.anti[key][t] })
		slices.SortStableFunc(tos, func(x, y string) int { return cmp.Compare(m[y].w, m[x].w) })
		if len(tos) > b.p.k {
			tos = tos[:b.p.k]
		}
		if len(tos) > 0 {
			keep[key] = tos
		}
	}
	all := map[string]bool{}
	for key, tos := range keep {
		all[key] = true
		for _, t := range tos {
			all[t] = true
		}
	}
	lx := &lexicon{keys: sortedKeys(all)}
	id := map[string]int32{}
	for i, k := range lx.keys {
		id[k] = int32(i)
		if strings.Contains(k, " ") {
			lx.phrases++
		}
	}
	for _, w := range b.vs.words[:min(b.p.common, len(b.vs.words))] {
		if len(w) >= 4 { // shorter words are never corrected anyway
			lx.common = append(lx.common, w)
		}
	}
	slices.Sort(lx.common)
	lx.rels = make([][]rel, len(lx.keys))
	lx.kinds = make([][]string, len(lx.keys))
	for i, k := range lx.keys {
		for _, t := range keep[k] {
			l := b.acc[k][t]
			lx.rels[i] = append(lx.rels[i], rel{id[t], float32(l.w)})
			lx.kinds[i] = append(lx.kinds[i], l.kind)
		}
	}
	return lx
}

// encode writes the lexicon in the format internal/lexicon reads:
// "cxlex1\n", the entry count, each entry as a length-prefixed string in
// sorted order, then for each entry its relation count and each relation
// as the target entry's number and a weight byte (weight × 255), then the
// count of common words and each as a length-prefixed string, sorted.
// Numbers are unsigned varints.
func (lx *lexicon) encode() []byte {
	out := []byte("cxlex1\n")
	out = binary.AppendUvarint(out, uint64(len(lx.keys)))
	for _, k := range lx.keys {
		out = binary.AppendUvarint(out, uint64(len(k)))
		out = append(out, k...)
	}
	for _, rs := range lx.rels {
		out = binary.AppendUvarint(out, uint64(len(rs)))
		for _, r := range rs {
			out = binary.AppendUvarint(out, uint64(r.to))
			out = append(out, byte(math.Round(float64(min(r.w, 1))*255)))
		}
	}
	out = binary.AppendUvarint(out, uint64(len(lx.common)))
	for _, w := range lx.common {
		out = binary.AppendUvarint(out, uint64(len(w)))
		out = append(out, w...)
	}
	return out
}

// explain writes the relations of word (or phrase) for -explain.
func (lx *lexicon) explain(w io.Writer, word string) error {
	parts := strings.Fields(word)
	for i, p := range parts {
		parts[i] = porter.Stem(p)
	}
	key := strings.Join(parts, " ")
	i, ok := slices.BinarySearch(lx.keys, key)
	if !ok {
		_, err := fmt.Fprintf(w, "%s (%s): not in the lexicon\n", word, key)
		return err
	}
	var b strings.Builder
	for j, r := range lx.rels[i] {
		fmt.Fprintf(&b, " %s:%.2f/%s", lx.keys[r.to], r.w, lx.kinds[i][j])
	}
	_, err := fmt.Fprintf(w, "%s (%s):%s\n", word, key, b.String())
	return err
}

func clamp(x, lo, hi float64) float64 { return max(lo, min(hi, x)) }
