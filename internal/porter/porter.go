// Package porter is the Porter stemmer, shared by discoveryd's search index
// and the generators of its data (tools/lexgen, tools/vecgen), so that all
// reduce words to the same stems. It sits in the module's own internal/
// because both sides import it.
package porter

// Stem reduces an English lowercase word to its Porter stem (M.F. Porter,
// "An algorithm for suffix stripping", 1980, with the published revisions
// "bli"→"ble" and "logi"→"log"). Words of one or two letters, and words with
// anything but ASCII letters, are returned unchanged.
func Stem(w string) string {
	if len(w) <= 2 {
		return w
	}
	for i := range len(w) {
		if w[i] < 'a' || w[i] > 'z' {
			return w
		}
	}
	b := []byte(w)
	b = step1a(b)
	b = step1b(b)
	b = step1c(b)
	b = step2(b)
	b = step3(b)
	b = step4(b)
	b = step5(b)
	return string(b)
}

// isCons reports whether b[i] is a consonant in Porter's sense: y is a
// consonant at the start of a word or after a vowel.
func isCons(b []byte, i int) bool {
	switch b[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !isCons(b, i-1)
	}
	return true
}

// measure is m in [C](VC)^m[V] for b.
func measure(b []byte) int {
	m := 0
	i := 0
	n := len(b)
	for i < n && isCons(b, i) {
		i++
	}
	for i < n {
		for i < n && !isCons(b, i) {
			i++
		}
		if i >= n {
			break
		}
		for i < n && isCons(b, i) {
			i++
		}
		m++
	}
	return m
}

// hasVowel reports whether b contains a vowel.
func hasVowel(b []byte) bool {
	for i := range b {
		if !isCons(b, i) {
			return true
		}
	}
	return false
}

// doubleCons reports whether b ends in a double consonant.
func doubleCons(b []byte) bool {
	n := len(b)
	return n >= 2 && b[n-1] == b[n-2] && isCons(b, n-1)
}

// cvc reports whether b ends consonant-vowel-consonant where the last
// consonant is not w, x or y (Porter's *o).
func cvc(b []byte) bool {
	n := len(b)
	if n < 3 || !isCons(b, n-1) || isCons(b, n-2) || !isCons(b, n-3) {
		return false
	}
	c := b[n-1]
	return c != 'w' && c != 'x' && c != 'y'
}

func hasSuffix(b []byte, s string) bool {
	return len(b) >= len(s) && string(b[len(b)-len(s):]) == s
}

// replace swaps suffix s of b for r when the remaining stem has measure > 0.
func replace(b []byte, s, r string) []byte {
	base := b[:len(b)-len(s)]
	if measure(base) > 0 {
		return append(base, r...)
	}
	return b
}

func step1a(b []byte) []byte {
	switch {
	case hasSuffix(b, "sses"):
		return b[:len(b)-2]
	case hasSuffix(b, "ies"):
		return b[:len(b)-2]
	case hasSuffix(b, "ss"):
		return b
	case hasSuffix(b, "s"):
		return b[:len(b)-1]
	}
	return b
}

func step1b(b []byte) []byte {
	if hasSuffix(b, "eed") {
		if measure(b[:len(b)-3]) > 0 {
			return b[:len(b)-1]
		}
		return b
	}
	var base []byte
	switch {
	case hasSuffix(b, "ed") && hasVowel(b[:len(b)-2]):
		base = b[:len(b)-2]
	case hasSuffix(b, "ing") && hasVowel(b[:len(b)-3]):
		base = b[:len(b)-3]
	default:
		return b
	}
	switch {
	case hasSuffix(base, "at"), hasSuffix(base, "bl"), hasSuffix(base, "iz"):
		return append(base, 'e')
	case doubleCons(base):
		if c := base[len(base)-1]; c != 'l' && c != 's' && c != 'z' {
			return base[:len(base)-1]
		}
	case measure(base) == 1 && cvc(base):
		return append(base, 'e')
	}
	return base
}

func step1c(b []byte) []byte {
	if hasSuffix(b, "y") && hasVowel(b[:len(b)-1]) {
		b[len(b)-1] = 'i'
	}
	return b
}

var step2Rules = [][2]string{
	{"ational", "ate"}, {"tional", "tion"}, {"enci", "ence"}, {"anci", "ance"},
	{"izer", "ize"}, {"bli", "ble"}, {"alli", "al"}, {"entli", "ent"},
	{"eli", "e"}, {"ousli", "ous"}, {"ization", "ize"}, {"ation", "ate"},
	{"ator", "ate"}, {"alism", "al"}, {"iveness", "ive"}, {"fulness", "ful"},
	{"ousness", "ous"}, {"aliti", "al"}, {"iviti", "ive"}, {"biliti", "ble"},
	{"logi", "log"},
}

var step3Rules = [][2]string{
	{"icate", "ic"}, {"ative", ""}, {"alize", "al"}, {"iciti", "ic"},
	{"ical", "ic"}, {"ful", ""}, {"ness", ""},
}

var step4Suffixes = []string{
	"al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment",
	"ent", "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize",
}

// applyRules applies the rule with the longest matching suffix; as in
// Porter, a failed condition on that rule ends the step.
func applyRules(b []byte, rules [][2]string) []byte {
	best := -1
	for i, r := range rules {
		if hasSuffix(b, r[0]) && (best < 0 || len(r[0]) > len(rules[best][0])) {
			best = i
		}
	}
	if best < 0 {
		return b
	}
	return replace(b, rules[best][0], rules[best][1])
}

func step2(b []byte) []byte { return applyRules(b, step2Rules) }

func step3(b []byte) []byte { return applyRules(b, step3Rules) }

func step4(b []byte) []byte {
	best := ""
	for _, s := range step4Suffixes {
		if hasSuffix(b, s) && len(s) > len(best) {
			best = s
		}
	}
	if best == "" {
		return b
	}
	base := b[:len(b)-len(best)]
	if measure(base) <= 1 {
		return b
	}
	if best == "ion" && !hasSuffix(base, "s") && !hasSuffix(base, "t") {
		return b
	}
	return base
}

func step5(b []byte) []byte {
	if hasSuffix(b, "e") {
		base := b[:len(b)-1]
		if m := measure(base); m > 1 || (m == 1 && !cvc(base)) {
			b = base
		}
	}
	if measure(b) > 1 && doubleCons(b) && hasSuffix(b, "l") {
		b = b[:len(b)-1]
	}
	return b
}
