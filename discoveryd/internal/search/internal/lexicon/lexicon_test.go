package lexicon

import (
	"slices"
	"testing"

	"github.com/codeexec/codeexec/internal/porter"
)

// relatedStems returns the stems the embedded lexicon relates to key.
func relatedStems(t *testing.T, key string) []string {
	t.Helper()
	lx := Embedded()
	k := lx.Find(key)
	if k < 0 {
		t.Fatalf("lexicon has no entry %q", key)
	}
	var out []string
	for _, r := range lx.Related(k) {
		out = append(out, lx.keys[r>>8])
	}
	return out
}

func TestLexiconRelations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  string // a stem or a phrase of stems
		want string // the stem of a word WordNet or the vectors relate to it
	}{
		{porter.Stem("delete"), porter.Stem("erase")},   // WordNet synonym
		{porter.Stem("picture"), porter.Stem("image")},  // WordNet synonym
		{porter.Stem("comment"), porter.Stem("remark")}, // WordNet synonym
		{porter.Stem("remove"), porter.Stem("delete")},  // narrower (hyponym)
		{porter.Stem("children"), porter.Stem("child")}, // irregular inflection
		{"get rid of", porter.Stem("remove")},           // a phrase
		{porter.Stem("email"), porter.Stem("mail")},     // nearest by vector
	}
	for _, tt := range tests {
		if got := relatedStems(t, tt.key); !slices.Contains(got, tt.want) {
			t.Errorf("lexicon relates %q to %q, not %q", tt.key, got, tt.want)
		}
	}
}

func TestLexiconNoAntonyms(t *testing.T) {
	t.Parallel()
	// GloVe puts antonyms close together ("add" and "remove" share
	// contexts); the generator drops WordNet's antonyms and their synonyms.
	for _, pair := range [][2]string{{"add", "remove"}, {"open", "close"}, {"forget", "remember"}, {"enable", "disable"}} {
		a, z := porter.Stem(pair[0]), porter.Stem(pair[1])
		if slices.Contains(relatedStems(t, a), z) {
			t.Errorf("lexicon relates %q to its antonym %q", a, z)
		}
	}
}

func TestLexiconCommon(t *testing.T) {
	t.Parallel()
	lx := Embedded()
	// "raed" stems to "ra", a common stem; the word itself is not common.
	for w, want := range map[string]bool{"remove": true, "meeting": true, "calender": false, "raed": false} {
		if got := lx.IsCommon(w); got != want {
			t.Errorf("IsCommon(%q) = %v, want %v", w, got, want)
		}
	}
}

func TestParseLexiconErrors(t *testing.T) {
	t.Parallel()
	good := "cxlex1\n\x02\x01a\x01b\x01\x01\x80\x00\x01\x04word"
	if lx, err := Parse(good); err != nil || len(lx.keys) != 2 || lx.Related(0)[0] != 1<<8|0x80 || !lx.IsCommon("word") {
		t.Fatalf("Parse(good) = %+v, %v", lx, err)
	}
	for _, bad := range []string{"", "cxlex0\n", "cxlex1\n\x02\x01a", good + "x", "cxlex1\n\x01\x01a\x01\x05\x80\x00", "cxlex1\n\x01\x01a\x00\x01\x09x"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}
