package embed

import (
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// reference holds texts with the token ids and unit vectors that Hugging
// Face's tokenizers and ONNX Runtime's Python package give for them with
// the installed model (testdata/encoder.json; mean pooling, as
// sentence-transformers does for all-MiniLM-L6-v2).
func reference(t *testing.T) []struct {
	Text   string    `json:"text"`
	IDs    []int32   `json:"ids"`
	Vector []float32 `json:"vector"`
} {
	t.Helper()
	var cases []struct {
		Text   string    `json:"text"`
		IDs    []int32   `json:"ids"`
		Vector []float32 `json:"vector"`
	}
	b, err := os.ReadFile("testdata/encoder.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestEncoderMatchesPython: the tokens, and the vectors alone and among
// other texts, are the Python pipeline's, long texts cut at MaxTokens as
// there.
func TestEncoderMatchesPython(t *testing.T) {
	t.Parallel()
	e := installedEncoder(t)
	cases := reference(t)
	if e.Dims() != len(cases[0].Vector) {
		t.Fatalf("dims = %d, want %d", e.Dims(), len(cases[0].Vector))
	}
	var texts []string
	for _, c := range cases {
		texts = append(texts, c.Text)
		if got := e.Tokens(c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("tokens of %.40q = %v, want %v", c.Text, got, c.IDs)
		}
	}
	batch, err := e.Encode(texts)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		one, err := e.Encode([]string{c.Text})
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string][]float32{"alone": one[0], "among others": batch[i]} {
			if d := maxDiff(v, c.Vector); d > 1e-4 {
				t.Errorf("%.40q %s: vector differs from Python's by up to %g", c.Text, name, d)
			}
		}
	}
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestOpenSaysWhatIsMissing: an empty directory is "not installed"; a
// model without its library cannot run; a tokenizer of another kind is
// named as such.
func TestOpenSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := Open(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(empty dir) = %v, want a not-exist error", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ModelFile), []byte("not onnx"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, TokenizerFile), []byte(`{"model":{"type":"BPE","vocab":{}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "WordPiece") {
		t.Errorf("Open(BPE tokenizer) = %v, want it to ask for a WordPiece vocabulary", err)
	}
	tok := `{"model":{"type":"WordPiece","continuing_subword_prefix":"##","unk_token":"[UNK]","vocab":{"[UNK]":0,"[CLS]":1,"[SEP]":2}}}`
	if err := os.WriteFile(filepath.Join(dir, TokenizerFile), []byte(tok), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrNoRuntime) {
		t.Errorf("Open(no library) = %v, want ErrNoRuntime", err)
	}
}
