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

// sigmoid is word2vec's table of the logistic function over
// [-sigmoidMax, sigmoidMax], sigmoidSize entries.
const sigmoidMax, sigmoidSize = 6, 1000

// negativeTableSize is the number of slots of the negative-sampling table.
const negativeTableSize = 1 << 24

// trainer holds one training run's state. Every random draw comes from r,
// in a fixed order, so the same corpus always gives the same vectors.
type trainer struct {
	p       sgnsParams
	d       int
	r       rng
	in, out []float32
	// table draws negative samples; keep is each word's probability of
	// being kept by subsampling.
	table []int32
	keep  []float32
	sig   [sigmoidSize]float32
	grad  []float32
}

// trainSGNS learns word vectors from the corpus (word ids, -1 between
// paragraphs) by skip-gram with negative sampling (Mikolov et al. 2013),
// on one goroutine, so that the same corpus always gives the same
// vectors. It returns the input and the output (context) vectors, dims
// floats per word each.
func trainSGNS(v *vocab, corpus []int32, p sgnsParams, progress func(float64)) (in, out []float32) {
	t := newTrainer(v, p)
	sent := make([]int32, 0, 1024)
	total := int64(p.epochs) * int64(len(corpus))
	var done int64
	for range p.epochs {
		for start := 0; start < len(corpus); {
			end := start
			for end < len(corpus) && corpus[end] >= 0 {
				end++
			}
			sent = t.subsample(sent[:0], corpus[start:end])
			done += int64(end - start + 1)
			start = end + 1
			t.paragraph(sent, p.alpha*max(1-float32(float64(done)/float64(total)), 0.0001))
			if progress != nil && start%(1<<20) < end-start+1 {
				progress(float64(done) / float64(total))
			}
		}
	}
	return t.in, t.out
}

// newTrainer draws the initial input vectors (the output vectors start at
// zero) and builds the sampling and sigmoid tables.
func newTrainer(v *vocab, p sgnsParams) *trainer {
	n, d := len(v.words), p.dims
	t := &trainer{p: p, d: d, r: rng(1), in: make([]float32, n*d), out: make([]float32, n*d), grad: make([]float32, d)}
	for i := range t.in {
		t.in[i] = (t.r.float() - 0.5) / float32(d)
	}
	t.table = negativeTable(v.count)
	t.keep = make([]float32, n)
	for i, c := range v.count {
		f := float64(c) / float64(v.total)
		k := (math.Sqrt(f/p.sample) + 1) * p.sample / f
		t.keep[i] = float32(min(k, 1))
	}
	for i := range t.sig {
		e := math.Exp((float64(i)/sigmoidSize*2 - 1) * sigmoidMax)
		t.sig[i] = float32(e / (e + 1))
	}
	return t
}

// negativeTable spreads the words over the table's slots by the unigram
// distribution to the 3/4 power, which negative samples follow.
func negativeTable(count []int64) []int32 {
	table := make([]int32, negativeTableSize)
	var z float64
	for _, c := range count {
		z += math.Pow(float64(c), 0.75)
	}
	w, acc := 0, math.Pow(float64(count[0]), 0.75)/z
	for i := range table {
		table[i] = int32(w)
		if float64(i)/negativeTableSize > acc && w < len(count)-1 {
			w++
			acc += math.Pow(float64(count[w]), 0.75) / z
		}
	}
	return table
}

// subsample appends to sent the words of one paragraph that subsampling
// keeps.
func (t *trainer) subsample(sent, paragraph []int32) []int32 {
	for _, id := range paragraph {
		if t.keep[id] >= 1 || t.keep[id] > t.r.float() {
			sent = append(sent, id)
		}
	}
	return sent
}

// paragraph trains on every (center, context) pair of one subsampled
// paragraph, in a window of random width around each center.
func (t *trainer) paragraph(sent []int32, alpha float32) {
	w := t.p.window
	for i, center := range sent {
		b := int(t.r.next() % uint64(w))
		for j := i - w + b; j <= i+w-b; j++ {
			if j < 0 || j >= len(sent) || j == i {
				continue
			}
			t.pair(center, sent[j], alpha)
		}
	}
}

// pair moves the context word's input vector towards the center word's
// output vector and away from those of negative samples.
func (t *trainer) pair(center, ctx int32, alpha float32) {
	d := t.d
	vi := t.in[int(ctx)*d : int(ctx)*d+d]
	clear(t.grad)
	for k := 0; k <= t.p.negative; k++ {
		target, label := center, float32(1)
		if k > 0 {
			target = t.table[t.r.next()>>16%negativeTableSize]
			if target == center {
				continue
			}
			label = 0
		}
		vo := t.out[int(target)*d : int(target)*d+d]
		var f float32
		for x := range vi {
			f += vi[x] * vo[x]
		}
		g := (label - t.sigmoid(f)) * alpha
		for x := range vi {
			t.grad[x] += g * vo[x]
			vo[x] += g * vi[x]
		}
	}
	for x := range vi {
		vi[x] += t.grad[x]
	}
}

// sigmoid is the logistic function of f, from the table, saturating at 0
// and 1 outside it.
func (t *trainer) sigmoid(f float32) float32 {
	switch {
	case f > sigmoidMax:
		return 1
	case f < -sigmoidMax:
		return 0
	default:
		return t.sig[int((f+sigmoidMax)*(sigmoidSize/sigmoidMax/2))]
	}
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
