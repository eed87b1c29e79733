// Package fuzzy finds the words of a vocabulary within a small edit
// distance of a word, or that it begins: the search's typo tolerance.
package fuzzy

import (
	"hash/maphash"
	"slices"
	"strings"
	"unicode/utf8"
)

// Index finds vocabulary words within a small edit distance of a query word
// in time independent of the vocabulary size. It is a symmetric-delete
// index (as in SymSpell): every word is stored under each string obtained by
// deleting up to maxEdits runes; two words within optimal-string-alignment
// distance d share such a string with at most d deletions on either side,
// so a lookup generates the query's deletions, collects candidates, and
// verifies each with the exact distance. A deletion string is stored as
// its hash (hash/maphash), which costs no allocation; a collision only adds a
// candidate that the distance check then drops.
type Index struct {
	words   []string           // vocabulary, by word id
	deletes map[uint64][]int32 // hash of a deletion string → word ids
	sorted  []int32            // word ids in lexical order, for prefixes
	seed    maphash.Seed       // of the deletion strings' hashes
}

// maxFuzzyLen bounds the words that take part in typo matching: the
// deletion neighbourhood grows with the square of a word's length, and
// longer "words" are identifiers, hashes or URLs rather than misspellings.
const maxFuzzyLen = 24

// maxEdits is the typo budget for a word of n runes: none below 4 runes,
// one up to 7, two from 8.
func maxEdits(n int) int {
	switch {
	case n < 4:
		return 0
	case n < 8:
		return 1
	}
	return 2
}

// New indexes words, which are numbered in their order; words shorter
// than 3 runes are never candidates.
//
// A word of m runes needs no more deletions than its own budget
// maxEdits(m): when the query is longer, the extra runes are deleted on the
// query side; when it is shorter, its budget is no larger than the word's.
func New(words []string) *Index {
	// Sized for every word's whole neighbourhood (fewer in fact: words
	// share deletions), so that the map never grows while it is filled.
	size := 0
	for _, w := range words {
		n := len(w)
		switch maxEdits(n) {
		case 1:
			size += 1 + n
		case 2:
			size += 1 + n + n*(n-1)/2
		}
	}
	f := &Index{words: words, deletes: make(map[uint64][]int32, size), seed: maphash.MakeSeed()}
	for id, w := range words {
		rs := []rune(w)
		if len(rs) < 3 || len(rs) > maxFuzzyLen {
			continue
		}
		f.forDeletes(rs, maxEdits(len(rs)), func(h uint64) {
			ids := f.deletes[h]
			if len(ids) > 0 && ids[len(ids)-1] == int32(id) {
				return
			}
			f.deletes[h] = append(ids, int32(id))
		})
	}
	f.sorted = make([]int32, len(words))
	for i := range f.sorted {
		f.sorted[i] = int32(i)
	}
	slices.SortFunc(f.sorted, func(a, b int32) int { return strings.Compare(words[a], words[b]) })
	return f
}

// minPrefix is the shortest word completed as a prefix ("kube" →
// "kubernetes"); shorter ones match too much to mean anything.
const minPrefix = 4

// maxCompletions bounds how many vocabulary words one prefix stands for.
const maxCompletions = 8

// Completions calls fn for up to maxCompletions vocabulary words that
// start with w and are longer than it, shortest first.
func (f *Index) Completions(w string, fn func(id int32)) {
	if len(w) < minPrefix {
		return
	}
	i, _ := slices.BinarySearchFunc(f.sorted, w, func(id int32, w string) int { return strings.Compare(f.words[id], w) })
	end := i
	for end < len(f.sorted) && strings.HasPrefix(f.words[f.sorted[end]], w) {
		end++
	}
	if end-i > 4*maxCompletions {
		return // too common a stem to stand for any one word
	}
	var buf [4 * maxCompletions]int32
	ids := append(buf[:0], f.sorted[i:end]...)
	slices.SortStableFunc(ids, func(a, b int32) int { return len(f.words[a]) - len(f.words[b]) })
	for _, id := range ids[:min(len(ids), maxCompletions)] {
		if f.words[id] != w {
			fn(id)
		}
	}
}

// Lookup calls fn for every vocabulary word within the typo budget of w,
// with its distance; w itself (distance 0) is reported too if present.
func (f *Index) Lookup(w string, fn func(id int32, dist int)) {
	rs := []rune(w)
	d := maxEdits(len(rs))
	if d == 0 || len(rs) > maxFuzzyLen {
		return
	}
	var seen [32]int32
	seenIDs := seen[:0]
	f.forDeletes(rs, d, func(h uint64) {
		for _, id := range f.deletes[h] {
			if containsID(seenIDs, id) {
				continue
			}
			seenIDs = append(seenIDs, id)
			if dist := osaDistance(rs, []rune(f.words[id]), d); dist <= d {
				fn(id, dist)
			}
		}
	})
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// forDeletes calls fn with the hash of rs and of every string made by
// deleting up to d of its runes (rs has at most maxFuzzyLen runes).
// Duplicates may be reported.
func (f *Index) forDeletes(rs []rune, d int, fn func(uint64)) {
	var b [maxFuzzyLen * utf8.UTFMax]byte
	enc := b[:0]
	for _, r := range rs {
		enc = utf8.AppendRune(enc, r)
	}
	fn(maphash.Bytes(f.seed, enc))
	if d == 0 || len(rs) <= 1 {
		return
	}
	var del [maxFuzzyLen]rune
	buf := del[:len(rs)-1]
	for i := range rs {
		copy(buf, rs[:i])
		copy(buf[i:], rs[i+1:])
		f.forDeletes(buf, d-1, fn)
	}
}

// Within reports whether a and b are within the typo budget of the
// shorter of them (one edit from 4 runes, two from 8) by
// optimal-string-alignment distance; never when either has 64 runes or
// more.
func Within(a, b []rune) bool {
	d := maxEdits(min(len(a), len(b)))
	return d > 0 && osaDistance(a, b, d) <= d
}

// osaDistance is the optimal-string-alignment edit distance (insertions,
// deletions, substitutions and adjacent transpositions) between a and b; it
// returns limit+1 as soon as the distance is known to exceed limit.
func osaDistance(a, b []rune, limit int) int {
	if abs(len(a)-len(b)) > limit {
		return limit + 1
	}
	const maxLen = 64
	if len(a) >= maxLen || len(b) >= maxLen {
		return limit + 1
	}
	var rows [3][maxLen]int
	prev2, prev, cur := &rows[0], &rows[1], &rows[2]
	for j := 0; j <= len(b); j++ {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		best := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			cur[j] = v
			best = min(best, v)
		}
		if best > limit {
			return limit + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
