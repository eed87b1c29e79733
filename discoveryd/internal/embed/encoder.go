// Package embed turns text into a vector with a sentence-embedding model
// (all-MiniLM-L6-v2, quantized, as scripts/search-model.sh installs it)
// run whole by ONNX Runtime: BERT's WordPiece tokenizer here, the
// transformer in the runtime's library, loaded at run time through cgo,
// and the mean of its outputs scaled to unit length. A build without cgo,
// or a machine without the library, gets ErrNoRuntime from Open, and
// search ranks by words alone.
package embed

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// MaxTokens bounds the tokens of one text, [CLS] and [SEP] included, as
// the model was trained on pieces of text this long; the rest is cut.
const MaxTokens = 128

// ErrNoRuntime means ONNX Runtime cannot be used here: this build has no
// cgo, or its library cannot be loaded.
var ErrNoRuntime = errors.New("ONNX Runtime is not available")

// runner runs the transformer.
type runner interface {
	// run returns the last hidden state, rows × cols × dims, for rows
	// texts of cols tokens each (ids and mask row after row).
	run(ids, mask []int64, rows, cols int) ([]float32, error)
	close() error
}

// Encoder embeds texts. It is safe for concurrent use.
type Encoder struct {
	tok      wordPiece
	cls, sep int32
	rt       runner
	dims     int
	id       string
}

// Open loads the model in dir (ModelFile, TokenizerFile and LibraryFile)
// and checks that it runs. An error wrapping fs.ErrNotExist means nothing
// is installed there; one wrapping ErrNoRuntime, that it cannot run here.
func Open(dir string) (*Encoder, error) {
	model := filepath.Join(dir, ModelFile)
	sum, err := fileHash(model)
	if err != nil {
		return nil, fmt.Errorf("search model: %w", err)
	}
	e := &Encoder{id: sum[:16]}
	if e.tok, e.cls, e.sep, err = loadTokenizer(filepath.Join(dir, TokenizerFile)); err != nil {
		return nil, fmt.Errorf("search model: %w", err)
	}
	if e.rt, err = openRunner(filepath.Join(dir, LibraryFile), model); err != nil {
		return nil, fmt.Errorf("search model %s: %w", dir, err)
	}
	ids := []int64{int64(e.cls), int64(e.sep)}
	out, err := e.rt.run(ids, []int64{1, 1}, 1, 2)
	if err == nil && (len(out) == 0 || len(out)%2 != 0) {
		err = fmt.Errorf("%d outputs for 2 tokens", len(out))
	}
	if err != nil {
		_ = e.rt.close()
		return nil, fmt.Errorf("search model %s: does not run as a BERT encoder: %w", dir, err)
	}
	e.dims = len(out) / 2
	return e, nil
}

// fileHash is the SHA-256 of a file, in hex.
func fileHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Dims is the length of the vectors Encode returns.
func (e *Encoder) Dims() int { return e.dims }

// ID names the model's file by its content (16 hex digits of its
// SHA-256), so that vectors kept elsewhere are never mixed across models.
func (e *Encoder) ID() string { return e.id }

// Close releases the runtime's session.
func (e *Encoder) Close() error { return e.rt.close() }

// Tokens returns the token ids the model reads for text: [CLS], at most
// MaxTokens-2 pieces, [SEP].
func (e *Encoder) Tokens(text string) []int32 {
	ids := e.tok.appendIDs([]int32{e.cls}, text)
	if len(ids) > MaxTokens-1 {
		ids = ids[:MaxTokens-1]
	}
	return append(ids, e.sep)
}

// Encode returns each text's unit vector: the mean of the model's outputs
// over its tokens, scaled to unit length. Each text runs alone: the
// quantized model scales its activations by what the whole batch holds,
// so a text's vector would depend on its neighbours, and vectors are
// kept by their text's hash.
func (e *Encoder) Encode(texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var ids, mask []int64
	for i, t := range texts {
		toks := e.Tokens(t)
		ids, mask = ids[:0], mask[:0]
		for _, id := range toks {
			ids, mask = append(ids, int64(id)), append(mask, 1)
		}
		h, err := e.rt.run(ids, mask, 1, len(toks))
		if err != nil {
			return nil, fmt.Errorf("search model: %w", err)
		}
		if len(h) != len(toks)*e.dims {
			return nil, fmt.Errorf("search model: %d outputs for %d tokens of %d dims", len(h), len(toks), e.dims)
		}
		v := make([]float32, e.dims)
		for c := range toks {
			for k, x := range h[c*e.dims : (c+1)*e.dims] {
				v[k] += x
			}
		}
		Unitize(v)
		out[i] = v
	}
	return out, nil
}

// Unitize scales v to unit length and reports whether it was non-zero.
func Unitize(v []float32) bool {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return false
	}
	k := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= k
	}
	return true
}

// Dot is the dot product of a and b, which have the same length.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	for len(a) >= 4 {
		s0 += a[0] * b[0]
		s1 += a[1] * b[1]
		s2 += a[2] * b[2]
		s3 += a[3] * b[3]
		a, b = a[4:], b[4:]
	}
	for i := range a {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
