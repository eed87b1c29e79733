package main

import (
	"cmp"
	"math"
	"slices"
)

// vocab is the training vocabulary, most frequent word first.
type vocab struct {
	words []string
	count []int64
	id    map[string]int32
	total int64
}

// newVocab keeps the words seen at least minCount times, at most maxWords
// of them, by frequency (ties in byte order).
func newVocab(counts map[string]int64, minCount int64, maxWords int) *vocab {
	type wc struct {
		w string
		c int64
	}
	var all []wc
	for w, c := range counts {
		if c >= minCount {
			all = append(all, wc{w, c})
		}
	}
	slices.SortFunc(all, func(a, b wc) int {
		if c := cmp.Compare(b.c, a.c); c != 0 {
			return c
		}
		return cmp.Compare(a.w, b.w)
	})
	if len(all) > maxWords {
		all = all[:maxWords]
	}
	v := &vocab{id: make(map[string]int32, len(all))}
	for i, e := range all {
		v.words = append(v.words, e.w)
		v.count = append(v.count, e.c)
		v.id[e.w] = int32(i)
		v.total += e.c
	}
	return v
}

// rng is word2vec's linear congruential generator: fast, and the same
// sequence on every machine, so training is reproducible.
type rng uint64

func (r *rng) next() uint64 {
	*r = *r*25214903917 + 11
	return uint64(*r)
}

// float returns a number in [0, 1).
func (r *rng) float() float32 { return float32(r.next()>>40&0xFFFF) / 65536 }

// sgnsParams are the skip-gram with negative sampling settings.
type sgnsParams struct {
	dims     int
	window   int
	negative int
	epochs   int
	alpha    float32 // starting learning rate
	sample   float64 // subsampling threshold for frequent words
}

// trainSGNS learns word vectors from the corpus (word ids, -1 between
// paragraphs) by skip-gram with negative sampling (Mikolov et al. 2013),
// on one goroutine, so that the same corpus always gives the same
// vectors. It returns the input and the output (context) vectors, dims
// floats per word each.
func trainSGNS(v *vocab, corpus []int32, p sgnsParams, progress func(float64)) (in, out []float32) {
	n, d := len(v.words), p.dims
	r := rng(1)
	in = make([]float32, n*d)
	for i := range in {
		in[i] = (r.float() - 0.5) / float32(d)
	}
	out = make([]float32, n*d)

	// Negative samples follow the unigram distribution to the 3/4 power.
	const tableSize = 1 << 24
	table := make([]int32, tableSize)
	var z float64
	for _, c := range v.count {
		z += math.Pow(float64(c), 0.75)
	}
	w, acc := 0, math.Pow(float64(v.count[0]), 0.75)/z
	for i := range table {
		table[i] = int32(w)
		if float64(i)/tableSize > acc && w < n-1 {
			w++
			acc += math.Pow(float64(v.count[w]), 0.75) / z
		}
	}
	keep := make([]float32, n)
	for i, c := range v.count {
		f := float64(c) / float64(v.total)
		k := (math.Sqrt(f/p.sample) + 1) * p.sample / f
		keep[i] = float32(min(k, 1))
	}

	// sigmoid via a table, as word2vec does.
	const maxExp, expSize = 6, 1000
	var sig [expSize]float32
	for i := range sig {
		e := math.Exp((float64(i)/expSize*2 - 1) * maxExp)
		sig[i] = float32(e / (e + 1))
	}

	grad := make([]float32, d)
	sent := make([]int32, 0, 1024)
	total := int64(p.epochs) * int64(len(corpus))
	var done int64
	for range p.epochs {
		for start := 0; start < len(corpus); {
			// One paragraph, subsampled.
			end := start
			for end < len(corpus) && corpus[end] >= 0 {
				end++
			}
			sent = sent[:0]
			for _, id := range corpus[start:end] {
				if keep[id] >= 1 || keep[id] > r.float() {
					sent = append(sent, id)
				}
			}
			done += int64(end - start + 1)
			start = end + 1
			alpha := p.alpha * max(1-float32(float64(done)/float64(total)), 0.0001)
			for i, center := range sent {
				b := int(r.next() % uint64(p.window))
				for j := i - p.window + b; j <= i+p.window-b; j++ {
					if j < 0 || j >= len(sent) || j == i {
						continue
					}
					ctx := sent[j]
					vi := in[int(ctx)*d : int(ctx)*d+d]
					clear(grad)
					for k := 0; k <= p.negative; k++ {
						target, label := center, float32(1)
						if k > 0 {
							target = table[r.next()>>16%tableSize]
							if target == center {
								continue
							}
							label = 0
						}
						vo := out[int(target)*d : int(target)*d+d]
						var f float32
						for x := range vi {
							f += vi[x] * vo[x]
						}
						var g float32
						switch {
						case f > maxExp:
							g = (label - 1) * alpha
						case f < -maxExp:
							g = label * alpha
						default:
							g = (label - sig[int((f+maxExp)*(expSize/maxExp/2))]) * alpha
						}
						for x := range vi {
							grad[x] += g * vo[x]
							vo[x] += g * vi[x]
						}
					}
					for x := range vi {
						vi[x] += grad[x]
					}
				}
			}
			if progress != nil && start%(1<<20) < end-start+1 {
				progress(float64(done) / float64(total))
			}
		}
	}
	return in, out
}

// normalize scales each of the n vectors in vs to unit length.
func normalize(vs []float32, d int) {
	for i := 0; i+d <= len(vs); i += d {
		var s float64
		for _, x := range vs[i : i+d] {
			s += float64(x) * float64(x)
		}
		if s == 0 {
			continue
		}
		inv := float32(1 / math.Sqrt(s))
		for x := range vs[i : i+d] {
			vs[i+x] *= inv
		}
	}
}
