package search

import (
	"unicode"

	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/fuzzy"
)

// typoCandidates is how many of the best untiered matches by words are
// checked for being the tool the whole query misspells. The words find a
// misspelt name in their top five for all but one tool of the corpus
// (docs/SEARCH.md), so a few more suffice.
const typoCandidates = 10

// nameLike appends the query q squashed (appendSquashed) to dst and
// reports whether it may misspell a tool name: no shorter than 4 runes,
// no longer than the longest name allows.
func (ix *Index) nameLike(dst []rune, q string) ([]rune, bool) {
	sq, ok := appendSquashed(dst, q)
	return sq, ok && len(sq) >= 4 && len(sq) <= ix.longest+2
}

// markMisspeltNames lifts to tierTypo the candidates h (the typoCandidates
// best untiered matches by words among those with a word of their name in
// the query) whose name the squashed query sq spells within the typo
// budget ("create isuse" for create_issue). A misspelt name is a name:
// like an exact one it must not be pushed down by what the model makes of
// a word it has never seen.
func (ix *Index) markMisspeltNames(s *scratch, sq []rune, h []cand) {
	var nbuf [maxSquashed]rune
	for _, c := range h {
		doc := &ix.docs[c.doc]
		for _, name := range [2]string{doc.Tool, doc.ToolAlias} {
			if n, ok := appendSquashed(nbuf[:0], name); ok && fuzzy.Within(sq, n) {
				s.tier[c.doc] = tierTypo
				break
			}
		}
	}
}

// maxSquashed bounds the squashed names compared: longer ones are not
// tool names a query misspells.
const maxSquashed = 63

// appendSquashed appends s lowercased with everything but letters and
// digits dropped, as squash does, or reports false when that is longer
// than maxSquashed runes.
func appendSquashed(dst []rune, s string) ([]rune, bool) {
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if len(dst) == maxSquashed {
				return dst, false
			}
			dst = append(dst, unicode.ToLower(r))
		}
	}
	return dst, true
}
