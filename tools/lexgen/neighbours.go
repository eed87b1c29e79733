package main

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
)

// addNeighbours relates each stem to its nearest stems by vector that
// WordNet does not already link, in both directions. The most frequent
// words (function words, "take", "get") are near everything and take no
// part.
func (b *builder) addNeighbours() {
	stems := sortedKeys(b.svec)
	near := b.nearest(stems)
	for i, ns := range near {
		for _, x := range ns {
			a, z := stems[i], stems[x.j]
			if b.anti[a][z] || b.anti[z][a] || b.frequent[a] || b.frequent[z] {
				continue
			}
			w := b.p.weight["near"] * clamp((float64(x.c)-b.p.nearMin)/b.p.nearSpan, 0, 1)
			for _, pair := range [2][2]string{{a, z}, {z, a}} {
				if _, linked := b.acc[pair[0]][pair[1]]; !linked {
					b.add(pair[0], pair[1], w, "near")
				}
			}
		}
	}
}

type nb struct {
	j int32
	c float32
}

// nearest returns, for each stem, its p.neighbours nearest stems by cosine
// at or above p.nearMin, nearest first. The brute-force search is the
// generator's slow part (a minute or two), so -cache keeps its result.
func (b *builder) nearest(stems []string) [][]nb {
	if b.cache != "" {
		if near, err := readNearCache(b.cache, len(stems)); err == nil {
			return near
		}
	}
	n := len(stems)
	mat := make([]float32, n*dims)
	for i, st := range stems {
		copy(mat[i*dims:], b.svec[st])
	}
	near := make([][]nb, n)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for wk := range workers {
		wg.Go(func() {
			for i := wk; i < n; i += workers {
				a := mat[i*dims : (i+1)*dims]
				var top []nb
				floor := float32(min(b.p.nearMin, knnFloor))
				for j := range n {
					if j == i {
						continue
					}
					c := dot(a, mat[j*dims:(j+1)*dims])
					if c < floor {
						continue
					}
					top = append(top, nb{int32(j), c})
					if len(top) >= 4*b.p.neighbours {
						slices.SortFunc(top, func(x, y nb) int { return cmp.Compare(y.c, x.c) })
						top = top[:b.p.neighbours]
						floor = top[len(top)-1].c
					}
				}
				slices.SortFunc(top, func(x, y nb) int { return cmp.Or(cmp.Compare(y.c, x.c), cmp.Compare(x.j, y.j)) })
				near[i] = top[:min(len(top), b.p.neighbours)]
			}
		})
	}
	wg.Wait()
	if b.cache != "" {
		writeNearCache(b.cache, near)
	}
	return near
}

func writeNearCache(path string, near [][]nb) {
	var out []byte
	out = binary.AppendUvarint(out, uint64(len(near)))
	for _, ns := range near {
		out = binary.AppendUvarint(out, uint64(len(ns)))
		for _, x := range ns {
			out = binary.AppendUvarint(out, uint64(x.j))
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(x.c))
		}
	}
	_ = os.WriteFile(path, out, 0o644) // a cache: failing to write it only costs time
}

func readNearCache(path string, n int) ([][]nb, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	next := func() uint64 {
		v, k := binary.Uvarint(b)
		b = b[k:]
		return v
	}
	if int(next()) != n {
		return nil, fmt.Errorf("cache is for another vocabulary")
	}
	near := make([][]nb, n)
	for i := range near {
		c := int(next())
		for range c {
			j := int32(next())
			near[i] = append(near[i], nb{j, math.Float32frombits(binary.LittleEndian.Uint32(b))})
			b = b[4:]
		}
	}
	return near, nil
}

// knnFloor is the lowest cosine the nearest-neighbour search keeps, so that
// a cache serves any -near-min above it.
const knnFloor = 0.5
