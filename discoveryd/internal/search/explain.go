package search

import (
	"slices"
	"strings"

	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/porter"
)

// termFields records the fields of one document that contain a term, as a
// bit set over the field constants.
type termFields struct {
	term   int32
	fields uint8
}

// fieldsOf turns a document's term frequencies into its sorted termFields.
func fieldsOf(tfs []termFreq) []termFields {
	out := make([]termFields, 0, len(tfs))
	for _, t := range tfs {
		var m uint8
		for f := range numFields {
			if t.tf[f] > 0 {
				m |= 1 << f
			}
		}
		out = append(out, termFields{t.term, m})
	}
	slices.SortFunc(out, func(a, b termFields) int { return int(a.term - b.term) })
	return out
}

// fieldLabels name the fields in explanations.
var fieldLabels = [numFields]string{
	fieldName:       "name",
	fieldServer:     "server",
	fieldDesc:       "description",
	fieldParam:      "parameter",
	fieldParamText:  "parameter description",
	fieldServerDesc: "server description",
}

// explain says in a few words why document d matched the query whose units
// s holds: the kind of name match for a lifted tier, else for each field
// the words that matched there, each with the query's word when the tool
// uses another ("image (for picture)").
func (ix *Index) explain(s *scratch, d int32, tier uint8) string {
	switch tier {
	case tierName:
		return "exact name"
	case tierExact:
		return "exact alias or server-qualified name"
	case tierLoose:
		return "tool name in the query"
	}
	var byField [numFields][]string
	var seen []int32 // terms already explained
	start := 0
	for _, u := range s.units {
		best, bestW := termFields{term: -1}, float32(0)
		for _, a := range s.ualts[start:u.end] {
			if a.weight <= bestW {
				continue
			}
			if k, ok := slices.BinarySearchFunc(ix.fields[d], a.term, func(tf termFields, t int32) int { return int(tf.term - t) }); ok {
				best, bestW = ix.fields[d][k], a.weight
			}
		}
		start = u.end
		if best.term < 0 || slices.Contains(seen, best.term) {
			continue
		}
		seen = append(seen, best.term)
		f := 0
		for best.fields&(1<<f) == 0 {
			f++
		}
		word := ix.surface[best.term]
		if q := strings.ToLower(u.word); porter.Stem(q) != porter.Stem(word) && q != word {
			word += " (for " + u.word + ")"
		}
		byField[f] = append(byField[f], word)
	}
	var b strings.Builder
	for f, words := range byField {
		if len(words) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(fieldLabels[f])
		b.WriteString(": ")
		b.WriteString(strings.Join(words, ", "))
	}
	return b.String()
}
