package embed

import (
	"encoding/json"
	"fmt"
	"os"
)

// loadTokenizer reads the WordPiece vocabulary of a Hugging Face
// tokenizer.json, and the ids of the special tokens a BERT input needs.
func loadTokenizer(path string) (wp wordPiece, cls, sep int32, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return wp, 0, 0, fmt.Errorf("read tokenizer: %w", err)
	}
	var t struct {
		Model struct {
			Type     string           `json:"type"`
			Vocab    map[string]int32 `json:"vocab"`
			UnkToken string           `json:"unk_token"`
			Prefix   string           `json:"continuing_subword_prefix"`
		} `json:"model"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return wp, 0, 0, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	if t.Model.Type != "WordPiece" || t.Model.Prefix != "##" {
		return wp, 0, 0, fmt.Errorf("tokenizer %s: model is %q with prefix %q; a BERT WordPiece vocabulary (prefix ##) is needed", path, t.Model.Type, t.Model.Prefix)
	}
	ids := map[string]int32{}
	for _, name := range []string{t.Model.UnkToken, "[CLS]", "[SEP]"} {
		id, ok := t.Model.Vocab[name]
		if !ok {
			return wp, 0, 0, fmt.Errorf("tokenizer %s: no %q token in the vocabulary", path, name)
		}
		ids[name] = id
	}
	return wordPiece{vocab: t.Model.Vocab, unk: ids[t.Model.UnkToken]}, ids["[CLS]"], ids["[SEP]"], nil
}
