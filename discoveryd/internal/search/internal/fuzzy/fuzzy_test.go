package fuzzy

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestOSADistance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b  string
		limit int
		want  int
	}{
		{"file", "file", 2, 0},
		{"fiel", "file", 2, 1}, // transposition
		{"fle", "file", 2, 1},
		{"repostiory", "repository", 2, 1},
		{"reposotory", "repository", 2, 1},
		{"kitten", "sitting", 5, 3},
		{"kitten", "sitting", 1, 2}, // capped at limit+1
		{"abc", "abcdef", 2, 3},
	}
	for _, tt := range tests {
		if got := osaDistance([]rune(tt.a), []rune(tt.b), tt.limit); got != tt.want {
			t.Errorf("osaDistance(%q, %q, %d) = %d, want %d", tt.a, tt.b, tt.limit, got, tt.want)
		}
	}
}

func TestWithin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want bool
	}{
		{"createisuse", "createissue", true},  // one transposition
		{"createisue", "createissue", true},   // one deletion
		{"craeteisue", "createissue", true},   // two edits, 8 runes or more
		{"craetexsxue", "createissue", false}, // three
		{"fiel", "file", true},                // one edit from 4 runes
		{"fiel", "fil", false},                // none below 4
		{"reda", "rxdb", false},               // two edits under 8 runes
		{"createissue", "createissue", true},  // the same
		{"", "", false},
	}
	for _, tt := range tests {
		if got := Within([]rune(tt.a), []rune(tt.b)); got != tt.want {
			t.Errorf("Within(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestFuzzyLookup(t *testing.T) {
	t.Parallel()
	f := New([]string{"file", "files", "repository", "kubernetes", "pod", "screenshot"})
	tests := []struct {
		query string
		want  []string // words found, any order
	}{
		{"fiel", []string{"file"}},             // transposition; "files" is 2 edits away
		{"repostory", []string{"repository"}},  // 9 runes: 2 edits allowed
		{"kuberntes", []string{"kubernetes"}},  // deletion
		{"screnshott", []string{"screenshot"}}, // 2 edits
		{"pdo", nil},                           // under 4 runes: no typo budget
		{"fxyz", nil},                          // too far
		{"scrxxnshot", []string{"screenshot"}}, // 2 substitutions, 10 runes
		{"filez", []string{"file", "files"}},   // substitution and deletion
	}
	for _, tt := range tests {
		var got []string
		f.Lookup(tt.query, func(id int32, _ int) { got = append(got, f.words[id]) })
		slices.Sort(got)
		got = slices.Compact(got)
		want := slices.Clone(tt.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("Lookup(%q) = %q, want %q", tt.query, got, want)
		}
	}
}

func TestFuzzyCompletions(t *testing.T) {
	t.Parallel()
	f := New([]string{"kubernetes", "kubectl", "kube", "calendar", "calendars", "pod"})
	tests := []struct {
		prefix string
		want   []string
	}{
		{"kube", []string{"kubectl", "kubernetes"}}, // shortest first, not the word itself
		{"calend", []string{"calendar", "calendars"}},
		{"kub", nil}, // under minPrefix
		{"zzzz", nil},
	}
	for _, tt := range tests {
		var got []string
		f.Completions(tt.prefix, func(id int32) { got = append(got, f.words[id]) })
		if !slices.Equal(got, tt.want) {
			t.Errorf("Completions(%q) = %q, want %q", tt.prefix, got, tt.want)
		}
	}
}

// TestFuzzyLookupMatchesEveryWordInBudget checks Lookup against the
// distance to every word of a vocabulary dense in near neighbours (a
// small alphabet, runes of two and four bytes among it): it finds each word
// within the query's budget, with its distance, and nothing else. Deletion
// strings are kept as hashes: a lost candidate would show here; a spurious
// one (a hash collision, too rare to meet here) is dropped by the distance
// check Lookup makes of every candidate.
func TestFuzzyLookupMatchesEveryWordInBudget(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	// Up to two runes longer than maxFuzzyLen, which are left out of typo
	// matching on both sides, and runes of two and four bytes.
	alphabet := []rune("abcdeé😀")
	word := func() string {
		rs := make([]rune, 3+rng.IntN(maxFuzzyLen))
		for i := range rs {
			rs[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(rs)
	}
	var words []string
	seen := map[string]bool{}
	for len(words) < 3000 {
		if w := word(); !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	f := New(words)
	for range 400 {
		q := []rune(word())
		if rng.IntN(2) == 0 { // half of them one edit from a word
			q = []rune(words[rng.IntN(len(words))])
			q[rng.IntN(len(q))] = alphabet[rng.IntN(len(alphabet))]
		}
		d := maxEdits(len(q))
		want := map[string]int{}
		for _, w := range words {
			wr := []rune(w)
			if len(q) > maxFuzzyLen || len(wr) > maxFuzzyLen {
				continue
			}
			if dist := osaDistance(q, wr, d); dist <= d && d > 0 {
				want[w] = dist
			}
		}
		got := map[string]int{}
		f.Lookup(string(q), func(id int32, dist int) { got[f.words[id]] = dist })
		if !maps.Equal(got, want) {
			t.Fatalf("Lookup(%q) = %v, want %v", string(q), got, want)
		}
	}
}
