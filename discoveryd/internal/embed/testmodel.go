package embed

// New makes a model from its parts, for tests that need a small one:
// tokens (which must include "[UNK]"), each token's vector (all of one
// length) and weight. Vectors are stored as Read stores them, in int8
// with a scale per token.
func New(tokens []string, vecs [][]float32, weights []float32) *Model {
	dims := len(vecs[0])
	m := &Model{dims: dims, tok: wordPiece{vocab: map[string]int32{}, unk: -1}}
	for i, t := range tokens {
		m.tok.vocab[t] = int32(i)
		m.tokens = append(m.tokens, t)
		special := len(t) > 2 && t[0] == '[' && t[len(t)-1] == ']'
		m.special = append(m.special, special)
		if t == "[UNK]" {
			m.tok.unk = int32(i)
		}
		var peak float32
		for _, c := range vecs[i] {
			peak = max(peak, c, -c)
		}
		scale := peak / 127
		m.scale = append(m.scale, scale)
		for _, c := range vecs[i] {
			q := float32(0)
			if scale > 0 {
				q = c / scale
			}
			m.vecs = append(m.vecs, int8(max(-127, min(127, q+0.5*sign(q)))))
		}
	}
	m.weight = weights
	return m
}

func sign(x float32) float32 {
	if x < 0 {
		return -1
	}
	return 1
}
