// Package embed turns text into a vector with a static distillation of a
// sentence-embedding model: a table of one vector per WordPiece token of
// the model's vocabulary, made once by scripts/search-model.sh from the
// model's own outputs (model2vec's method). A text's vector is the
// weighted mean of its tokens' vectors, scaled to unit length, so that
// embedding costs a tokenizer pass and a few hundred additions per token,
// not a transformer's forward pass.
package embed

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// magic starts every model file, and names its format's version.
const magic = "CXEMBED1"

// Model is a loaded static embedding table. It is immutable and safe for
// concurrent use.
type Model struct {
	dims    int
	tok     wordPiece
	weight  []float32 // by token id: its weight in a mean
	vecs    []int8    // by token id, dims each
	scale   []float32 // by token id: what one unit of vecs is worth
	special []bool    // [CLS], [SEP], [PAD]…: never embedded
	tokens  []string  // by token id
}

// Dims is the length of the vectors Embed writes.
func (m *Model) Dims() int { return m.dims }

// Tokens is the size of the vocabulary.
func (m *Model) Tokens() int { return len(m.weight) }

// Load reads a model file written by scripts/search-model.py.
func Load(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open search model: %w", err)
	}
	defer f.Close()
	m, err := Read(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("search model %s: %w", path, err)
	}
	return m, nil
}

// errFormat says what a model file must hold.
var errFormat = errors.New("not a codeexec search model (want magic " + magic + ", then dims, count, tokens, weights, int8 vectors and scales)")

// Read parses a model from r: the magic; dims and count as little-endian
// uint32; count tokens, each a length byte and its bytes; count float32
// weights; count×dims int8 components; count float32 scales.
func Read(r io.Reader) (*Model, error) {
	br := bufio.NewReader(r)
	head := make([]byte, len(magic)+8)
	if _, err := io.ReadFull(br, head); err != nil || string(head[:len(magic)]) != magic {
		return nil, errFormat
	}
	dims := int(binary.LittleEndian.Uint32(head[len(magic):]))
	count := int(binary.LittleEndian.Uint32(head[len(magic)+4:]))
	if dims < 1 || dims > 4096 || count < 1 || count > 1<<22 {
		return nil, fmt.Errorf("%w: dims %d, count %d out of range", errFormat, dims, count)
	}
	m := &Model{dims: dims, tok: wordPiece{vocab: make(map[string]int32, count), unk: -1}, special: make([]bool, count)}
	for i := range count {
		n, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("%w: token %d: %w", errFormat, i, err)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, fmt.Errorf("%w: token %d: %w", errFormat, i, err)
		}
		t := string(b)
		m.tok.vocab[t] = int32(i)
		m.tokens = append(m.tokens, t)
		if len(t) > 2 && t[0] == '[' && t[len(t)-1] == ']' {
			m.special[i] = true
			if t == "[UNK]" {
				m.tok.unk = int32(i)
			}
		}
	}
	if m.tok.unk < 0 {
		return nil, fmt.Errorf("%w: no [UNK] token", errFormat)
	}
	m.weight = make([]float32, count)
	m.vecs = make([]int8, count*dims)
	m.scale = make([]float32, count)
	for _, v := range []any{m.weight, m.vecs, m.scale} {
		if err := binary.Read(br, binary.LittleEndian, v); err != nil {
			return nil, fmt.Errorf("%w: %w", errFormat, err)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("%w: bytes after the scales", errFormat)
	}
	for i, w := range m.weight {
		if math.IsNaN(float64(w)) || math.IsInf(float64(w), 0) || w < 0 {
			return nil, fmt.Errorf("%w: token %d has weight %v", errFormat, i, w)
		}
	}
	return m, nil
}

// AppendTokens appends the token ids of text, special tokens left out.
func (m *Model) AppendTokens(dst []int32, text string) []int32 {
	return m.tok.appendIDs(dst, text)
}

// Token is the text of token id, for explanations and tests.
func (m *Model) Token(id int32) string { return m.tokens[id] }

// Add adds token id's vector, times w times its own weight, to dst.
func (m *Model) Add(dst []float32, id int32, w float32) {
	if m.special[id] {
		return
	}
	k := w * m.weight[id] * m.scale[id]
	if k == 0 {
		return
	}
	row := m.vecs[int(id)*m.dims : int(id)*m.dims+m.dims]
	for i, c := range row {
		dst[i] += k * float32(c)
	}
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

// Write writes m in the format Read reads; tests use it to make small
// models.
func (m *Model) Write(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString(magic)
	_ = binary.Write(&b, binary.LittleEndian, [2]uint32{uint32(m.dims), uint32(len(m.weight))})
	for _, t := range m.tokens {
		b.WriteByte(byte(len(t)))
		b.WriteString(t)
	}
	for _, v := range []any{m.weight, m.vecs, m.scale} {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	_, err := w.Write(b.Bytes())
	return err
}
