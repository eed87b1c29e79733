package search

import (
	"strings"
	"unicode"
)

// appendWords appends the lowercase words of s to dst. Text is split at every
// rune that is neither a letter nor a digit; each alphanumeric run is split
// further at camelCase humps ("getFile", "HTTPServer") and at letter/digit
// boundaries ("ec2"). When a run is split, the whole run is kept as well, so
// "GitHub" yields "git", "hub" and "github" and both spellings of a query
// find it. Split parts of a single rune are dropped as noise; the whole run
// still carries them.
func appendWords(dst []string, s string) []string {
	start := -1
	for i, r := range s {
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case alnum && start < 0:
			start = i
		case !alnum && start >= 0:
			dst = appendRun(dst, s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		dst = appendRun(dst, s[start:])
	}
	return dst
}

// appendRun splits one alphanumeric run; see appendWords.
func appendRun(dst []string, run string) []string {
	if plainRun(run) {
		return append(dst, run)
	}
	// The runes, and where each starts in run (at: one more, len(run)),
	// so that a part is cut from run rather than made from runes.
	var runes [64]rune
	var starts [65]int
	rs, at := runes[:0], starts[:0]
	for i, r := range run {
		rs = append(rs, r)
		at = append(at, i)
	}
	at = append(at, len(run))
	begin := 0
	for i := 1; i <= len(rs); i++ {
		if i < len(rs) && !isBoundary(rs, i) {
			continue
		}
		if begin == 0 && i == len(rs) {
			break // not split at all
		}
		if i-begin > 1 {
			dst = append(dst, strings.ToLower(run[at[begin]:at[i]]))
		}
		begin = i
	}
	return append(dst, strings.ToLower(run))
}

// plainRun reports whether run is all ASCII lowercase letters or all
// ASCII digits, as most words are: such a run has no boundary inside and
// is its own lowercase.
func plainRun(run string) bool {
	digits := run != "" && run[0] >= '0' && run[0] <= '9'
	for i := range len(run) {
		c := run[i]
		if digits && (c < '0' || c > '9') || !digits && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

// isBoundary reports whether a word starts at rs[i] (0 < i < len(rs)).
func isBoundary(rs []rune, i int) bool {
	prev, cur := rs[i-1], rs[i]
	switch {
	case unicode.IsDigit(prev) != unicode.IsDigit(cur):
		return true
	case unicode.IsLower(prev) && unicode.IsUpper(cur):
		return true
	case unicode.IsUpper(prev) && unicode.IsUpper(cur) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
		return true // "HTTPServer": the S starts "Server"
	}
	return false
}

// squash lowercases s and drops everything but letters and digits, so that
// "read_file", "read-file", "readFile" and "Read File" compare equal.
func squash(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}
