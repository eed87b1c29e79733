package search

import (
	"slices"
	"strings"
	"unicode"

	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/lexicon"
	"github.com/codeexec/codeexec/internal/porter"
)

// Query-side weights of a term relative to the word the query used.
const (
	typoWeight1  = 0.8 // one edit away
	typoWeight2  = 0.6 // two edits away
	prefixWeight = 0.7 // the word begins a longer one ("kube" for "kubernetes")
)

// alt is one term a query unit may match, with its weight.
type alt struct {
	term   int32
	weight float32
}

// Search ranks the documents against query and returns at most limit hits
// (every match when limit <= 0). An empty query matches every document, in
// index order. A tool whose name or alias equals the whole query (ignoring
// case, optionally qualified as "server.tool", "server/tool", "server:tool"
// or "mcp__server__tool") always ranks first.
func (ix *Index) Search(query string, limit int) Result {
	return ix.SearchFunc(query, limit, nil)
}

// SearchFunc is Search over only the documents keep accepts (all of them
// when keep is nil): Total and Truncated count only those, and limit
// applies after filtering. Use it to search the servers a caller may see
// without asking for every hit and filtering afterwards. keep must be safe
// to call from the searching goroutine and must not retain the *Doc.
func (ix *Index) SearchFunc(query string, limit int, keep func(*Doc) bool) Result {
	q := strings.TrimSpace(query)
	if q == "" {
		return ix.all(limit, keep)
	}
	s := ix.pool.Get().(*scratch) //nolint:forcetypeassert // the pool's New makes only *scratch
	defer ix.pool.Put(s)
	defer s.reset()

	ix.markTiers(s, q)
	units := ix.scoreUnits(s, q)

	// Coordination: a document matching more of the query's words ranks
	// above one that matches a single word very well.
	maxScore := float32(0)
	var qbuf [maxSquashed]rune
	sq, nameLike := ix.nameLike(qbuf[:0], q)
	h := s.top[:0]
	for _, d := range s.touched {
		if units > 0 {
			s.acc[d] *= (1 - coordWeight) + coordWeight*s.matched[d]/float32(units)
		}
		// Name coverage: a tool whose whole name the query spells out
		// ("drop database" for drop-database) beats one that shares a
		// word with it (drop-index).
		if n := ix.nameLen[d]; n > 0 {
			s.acc[d] *= 1 + nameCoverageBoost*min(s.named[d], float32(n))/float32(n)
		}
		// Candidates for a misspelt name have a word of it right, or
		// corrected.
		if nameLike && s.named[d] > 0 && s.tier[d] == tierNone && (keep == nil || keep(&ix.docs[d])) {
			h = pushBest(h, cand{doc: d, score: s.acc[d]}, typoCandidates)
		}
	}
	ix.markMisspeltNames(s, sq, h)
	s.top = h[:0]
	// Then the best of them are rescored by meaning (rerank.go).
	ix.rerank(s, keep)
	if ix.semantic != nil {
		for _, d := range s.touched {
			s.pre[d] = s.acc[d]
		}
		ix.fuse(s, q, keep)
	}
	for _, d := range s.touched {
		maxScore = max(maxScore, s.acc[d])
	}
	return ix.collect(s, limit, float64(maxScore)+1, keep)
}

// markTiers lifts exact and near-exact name matches above scored matches.
func (ix *Index) markTiers(s *scratch, q string) {
	lift := func(ids []int32, tier uint8) {
		for _, d := range ids {
			s.touch(d)
			s.tier[d] = max(s.tier[d], tier)
		}
	}
	lq := strings.ToLower(q)
	lift(ix.names[lq], tierName)
	lift(ix.exact[lq], tierExact)
	ix.qualified(lq, func(d int32) { lift([]int32{d}, tierExact) })
	lift(ix.loose[squash(q)], tierLoose)
	for _, tok := range strings.Fields(q) {
		if tok != q && isIdentifier(tok) {
			lt := strings.ToLower(strings.Trim(tok, "`'\"(),"))
			lift(ix.names[lt], tierLoose)
			lift(ix.exact[lt], tierLoose)
		}
	}
	// A few consecutive words may spell a tool name: "who am i" is whoami,
	// "read file" is read_file.
	s.runs = appendRuns(s.runs[:0], q)
	for i := range min(len(s.runs), maxUnits) {
		key := s.runs[i]
		for j := i + 1; j < len(s.runs) && j < i+maxSpan; j++ {
			key += s.runs[j]
			lift(ix.loose[strings.ToLower(key)], tierLoose)
		}
	}
}

// qualifiers separate a server from a tool in the spellings agents use:
// "server.tool", "server/tool", "server:tool", "server__tool" and Claude
// Code's "mcp__server__tool".
var qualifiers = []string{"__", "/", ".", ":"}

// qualified calls fn for each document whose server and tool name or alias
// the lowercase query lq spells with one of the qualifiers.
func (ix *Index) qualified(lq string, fn func(doc int32)) {
	lq = strings.TrimPrefix(lq, "mcp__")
	for _, sep := range qualifiers {
		for off := 0; ; {
			i := strings.Index(lq[off:], sep)
			if i < 0 {
				break
			}
			server, tool := lq[:off+i], lq[off+i+len(sep):]
			off += i + len(sep)
			for _, m := range []map[string][]int32{ix.names, ix.exact} {
				for _, d := range m[tool] {
					doc := &ix.docs[d]
					if strings.EqualFold(doc.Server, server) || strings.EqualFold(doc.ServerAlias, server) {
						fn(d)
					}
				}
			}
		}
	}
}

// nameCoverageBoost is the score bonus of a tool whose name's words are all
// in the query, relative to one whose name shares none of them.
const nameCoverageBoost = 0.5

// maxUnits bounds the words of a query that are scored, and so the cost of
// one query, whatever its length.
const maxUnits = 32

// maxSpan is the most consecutive query words joined to match a tool name.
const maxSpan = 4

// isIdentifier reports whether tok looks like a tool name rather than an
// English word: it contains a separator or an inner capital.
func isIdentifier(tok string) bool {
	for i, r := range tok {
		if r == '_' || r == '.' || r == '/' || (i > 0 && unicode.IsUpper(r)) {
			return true
		}
	}
	return false
}

// scoreUnits adds the BM25F score of every query unit to s.acc and returns
// the number of units. A unit is one word of the query; a word split from a
// camelCase or digit run also matches the whole run. A word that matches
// nothing is tried joined to the next one, so "scrren shot" still finds
// "screenshot".
func (ix *Index) scoreUnits(s *scratch, q string) int {
	s.runs = appendRuns(s.runs[:0], q)
	s.content = s.content[:0]
	for i, r := range s.runs {
		if !stopwords[strings.ToLower(r)] {
			s.content = append(s.content, i)
		}
	}
	if len(s.content) == 0 {
		for i := range s.runs { // a query of stopwords only still means something
			s.content = append(s.content, i)
		}
	}
	if len(s.content) > maxUnits {
		s.content = s.content[:maxUnits] // a pasted paragraph is not a better query
	}
	s.phrases = ix.findPhrases(s.phrases[:0], s.runs)
	units := 0
	s.seen = s.seen[:0]
	s.units, s.ualts = s.units[:0], s.ualts[:0]
	for i := 0; i < len(s.content); i++ {
		at := s.content[i]
		word := s.runs[at]
		s.parts = appendRun(s.parts[:0], word)
		if len(s.parts) > 1 {
			whole := s.parts[len(s.parts)-1]
			for _, p := range s.parts[:len(s.parts)-1] {
				s.alts = ix.expand(s.alts[:0], p)
				s.alts = ix.expand(s.alts, whole)
				units += ix.scoreIfNew(s, p)
			}
			continue
		}
		s.alts = ix.expand(s.alts[:0], word)
		first := at
		// A phrase ("get rid of", "turn off") is one unit: its words and
		// the words related to the whole phrase.
		if ph := s.phrases[at]; ph.entry >= 0 {
			for i+1 < len(s.content) && s.content[i+1] < at+int(ph.words) {
				i++
				s.alts = ix.expand(s.alts, s.runs[s.content[i]])
			}
			s.alts = ix.addRelated(s.alts, ph.entry, -1)
		} else if len(s.alts) == 0 && i+1 < len(s.content) {
			s.alts = ix.expand(s.alts, word+s.runs[s.content[i+1]])
			if len(s.alts) > 0 {
				i++
			}
		}
		if last := s.content[i]; last > first {
			word = strings.Join(s.runs[first:last+1], " ")
		}
		units += ix.scoreIfNew(s, word)
	}
	return units
}

// phrase is a lexicon entry that a run of query words spells.
type phrase struct {
	entry int32 // -1 for none
	words uint8
}

// findPhrases sets dst[i] to the longest lexicon phrase that starts at
// runs[i] and begins with a content word.
func (ix *Index) findPhrases(dst []phrase, runs []string) []phrase {
	lx := lexicon.Embedded()
	var stems [lexicon.MaxPhrase]string
	for i := range runs {
		ph := phrase{entry: -1}
		if !stopwords[strings.ToLower(runs[i])] {
			for n := min(lexicon.MaxPhrase, len(runs)-i); n >= 2 && ph.entry < 0; n-- {
				for j := range n {
					stems[j] = porter.Stem(strings.ToLower(runs[i+j]))
				}
				ph = phrase{lx.Find(strings.Join(stems[:n], " ")), uint8(n)}
			}
		}
		dst = append(dst, ph)
	}
	return dst
}

// addRelated appends the index terms the lexicon relates to entry k, at
// relatedWeight times the relation's weight. own is the idf of the word
// the query used, or -1 when the index lacks it; a related term rarer than
// that word weighs proportionally less, as a synonym does.
func (ix *Index) addRelated(dst []alt, k int32, own float32) []alt {
	lx := lexicon.Embedded()
	for _, r := range lx.Related(k) {
		id := ix.lexTerm[r>>8]
		if id < 0 {
			continue
		}
		w := relatedWeight * float32(r&0xff) / 255
		if own >= 0 && ix.idf[id] > own {
			w *= own / ix.idf[id]
		}
		dst = append(dst, alt{id, w})
	}
	return dst
}

// relatedWeight scales the lexicon's weights against the word the query
// used.
const relatedWeight = 0.6

// coordWeight is the share of a document's score that depends on how much
// of the query it matches: one matching half the query's units scores
// 1 - coordWeight/2 of its BM25F sum.
const coordWeight = 0.5

// scoreIfNew scores the unit in s.alts unless it is empty or repeats an
// earlier word of the query, and returns how many units it scored.
func (ix *Index) scoreIfNew(s *scratch, word string) int {
	if len(s.alts) == 0 {
		return 0
	}
	if a := s.alts[0]; a.weight == 1 {
		if slices.Contains(s.seen, a.term) {
			return 0
		}
		s.seen = append(s.seen, a.term)
	}
	ix.scoreUnit(s)
	s.units = append(s.units, unit{word: word, end: len(s.ualts) + len(s.alts)})
	s.ualts = append(s.ualts, s.alts...)
	return 1
}

// expand appends the terms word w may match: its own stem; else, unless
// the synonym table knows it, its nearest typo corrections, else the words
// it is a prefix of; and then its synonyms.
func (ix *Index) expand(dst []alt, w string) []alt {
	w = strings.ToLower(w)
	t := porter.Stem(w)
	lk := lexicon.Embedded().Find(t)
	if id, ok := ix.terms[t]; ok {
		dst = append(dst, alt{id, 1})
	} else {
		dst = ix.corrections(dst, w, t)
	}
	// A synonym stands for the word the query used, so it weighs no more
	// than that word would: a rare synonym of a common word ("add" for
	// "create") must not outrank the word itself.
	own := float32(-1)
	if id, ok := ix.terms[t]; ok {
		own = ix.idf[id]
	}
	for _, syn := range synonyms[t] {
		if id, ok := ix.terms[syn]; ok {
			w := float32(synonymWeight)
			if own >= 0 && ix.idf[id] > own {
				w *= own / ix.idf[id]
			}
			dst = append(dst, alt{id, w})
		}
	}
	if lk >= 0 {
		dst = ix.addRelated(dst, lk, own)
	}
	if expHook != nil {
		dst = expHook(ix, dst, w, own)
	}
	return dst
}

// expHook is an experiment's extra alternatives (tests only).
var expHook func(ix *Index, dst []alt, w string, own float32) []alt

// corrections appends what the lowercase word w, with stem t, may be a
// misspelling of, unless the synonym table knows it or it is a common
// word: the index's nearest words by edits, else the words it begins.
func (ix *Index) corrections(dst []alt, w, t string) []alt {
	if _, ok := synonyms[t]; ok || lexicon.Embedded().IsCommon(w) {
		return dst
	}
	start := len(dst)
	best := 3
	ix.vocab.Lookup(w, func(id int32, dist int) {
		if dist < best {
			best = dist
			dst = dst[:start]
		}
		if dist == best {
			weight := float32(typoWeight1)
			if dist == 2 {
				weight = typoWeight2
			}
			dst = append(dst, alt{ix.wordTerm[id], weight})
		}
	})
	if len(dst) == start {
		ix.vocab.Completions(w, func(id int32) {
			dst = append(dst, alt{ix.wordTerm[id], prefixWeight})
		})
	}
	return dst
}

// scoreUnit adds to s.acc, for each document, the best weighted score among
// the unit's alternatives s.alts.
func (ix *Index) scoreUnit(s *scratch) {
	for _, a := range s.alts {
		for _, p := range ix.postings[a.term] {
			v := a.weight * p.weight
			if s.unit[p.doc] == 0 {
				s.utouched = append(s.utouched, p.doc)
			}
			s.unit[p.doc] = max(s.unit[p.doc], v)
			s.uweight[p.doc] = max(s.uweight[p.doc], a.weight)
			if p.name {
				s.uname[p.doc] = max(s.uname[p.doc], a.weight)
			}
		}
	}
	// A unit matched through a weak alternative counts as that much of a
	// match, so that many loose relations do not add up to the query's
	// own words.
	for _, d := range s.utouched {
		s.touch(d)
		s.acc[d] += s.unit[d]
		s.matched[d] += s.uweight[d]
		s.named[d] += s.uname[d]
		s.unit[d], s.uweight[d], s.uname[d] = 0, 0, 0
	}
	s.utouched = s.utouched[:0]
}

// appendRuns appends the alphanumeric runs of s.
func appendRuns(dst []string, s string) []string {
	return append(dst, strings.FieldsFunc(s, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})...)
}
