package embed

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// TestWordPieceSmallVocab checks the splitting rules on a vocabulary made
// here: lowercasing, accents, punctuation, pieces, and unknown words.
func TestWordPieceSmallVocab(t *testing.T) {
	t.Parallel()
	vocab := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "read", "##ing", "file", "_", "(", ")", "cafe", "un", "##read", "日"}
	wp := wordPiece{vocab: map[string]int32{}, unk: 1}
	for i, v := range vocab {
		wp.vocab[v] = int32(i)
	}
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"Reading FILE", []string{"read", "##ing", "file"}},
		{"read_file(x)", []string{"read", "_", "file", "(", "[UNK]", ")"}},
		{"Café", []string{"cafe"}},
		{"unread readx", []string{"un", "##read", "[UNK]"}},
		{"日日", []string{"日", "日"}},
		{"", nil},
	} {
		var got []string
		for _, id := range wp.appendIDs(nil, tt.in) {
			got = append(got, vocab[id])
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("tokens of %q = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestWordPieceMatchesHuggingFace compares the tokenizer with the ids
// that Hugging Face's tokenizers library gives for the installed model's
// vocabulary (testdata/wordpiece.json, made with tokenizers 0.23.3 from
// the model's tokenizer.json).
func TestWordPieceMatchesHuggingFace(t *testing.T) {
	t.Parallel()
	e := installedEncoder(t)
	var cases []struct {
		Text string  `json:"text"`
		IDs  []int32 `json:"ids"`
	}
	b, err := os.ReadFile("testdata/wordpiece.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if got := e.tok.appendIDs(nil, c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("tokens of %q = %v, want %v", c.Text, got, c.IDs)
		}
	}
}
