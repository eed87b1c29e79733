package main

import (
	"encoding/binary"
	"math"
	"slices"
)

// postprocess centres the vectors on their mean and removes their top
// principal direction ("all-but-the-top", Mu and Viswanath 2018), which
// every word shares and which makes unrelated words look alike, then
// scales each to unit length. The direction is found by power iteration
// from a fixed start, so the result is reproducible.
func postprocess(vs []float32, d, pcs int) {
	n := len(vs) / d
	mean := make([]float64, d)
	for i := range n {
		for x, y := range vs[i*d : i*d+d] {
			mean[x] += float64(y)
		}
	}
	for i := range n {
		for x := range d {
			vs[i*d+x] -= float32(mean[x] / float64(n))
		}
	}
	for range pcs {
		u := make([]float64, d)
		for x := range u {
			u[x] = float64(1 + x%3)
		}
		for range 50 {
			nu := make([]float64, d)
			for i := range n {
				v := vs[i*d : i*d+d]
				p := dot(v, u)
				for x := range v {
					nu[x] += p * float64(v[x])
				}
			}
			var norm float64
			for _, y := range nu {
				norm += y * y
			}
			norm = math.Sqrt(norm)
			for x := range nu {
				u[x] = nu[x] / norm
			}
		}
		for i := range n {
			v := vs[i*d : i*d+d]
			p := dot(v, u)
			for x := range v {
				v[x] -= float32(p * u[x])
			}
		}
	}
	normalize(vs, d)
}

// dot is the dot product of a vector and a direction, summed in float64.
func dot(v []float32, u []float64) float64 {
	var p float64
	for x := range v {
		p += float64(v[x]) * u[x]
	}
	return p
}

// encode writes internal/wordvec's vectors.bin: "cxvec1\n", the word
// count and the dimensions (uvarints), the words in byte order (uvarint
// length, bytes), then each word's vector in the same order as dims
// signed bytes, scaled so that its largest component is ±127. Only the
// direction of a vector matters to the search, so the scale is not kept.
func encode(words []string, vs []float32, d int) []byte {
	order := make([]int, len(words))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case words[a] < words[b]:
			return -1
		case words[a] > words[b]:
			return 1
		}
		return 0
	})
	b := []byte("cxvec1\n")
	b = binary.AppendUvarint(b, uint64(len(words)))
	b = binary.AppendUvarint(b, uint64(d))
	for _, i := range order {
		b = binary.AppendUvarint(b, uint64(len(words[i])))
		b = append(b, words[i]...)
	}
	for _, i := range order {
		b = append(b, quantize(vs[i*d:i*d+d])...)
	}
	return b
}

// quantize scales v so that its largest component is ±127 and rounds.
func quantize(v []float32) []byte {
	var m float32
	for _, x := range v {
		m = max(m, float32(math.Abs(float64(x))))
	}
	out := make([]byte, len(v))
	if m == 0 {
		return out
	}
	for i, x := range v {
		out[i] = byte(int8(math.Round(float64(x / m * 127))))
	}
	return out
}
