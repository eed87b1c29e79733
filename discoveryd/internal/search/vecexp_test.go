package search

// The experiments behind the dense rerank (docs/SEARCH.md, "tried"): the
// raw vectors they read, and query and document expansion here; the
// rerank's own in densexp_test.go. They need raw vectors from
// tools/vecgen's -raw flag, or the variables below, and are skipped
// without them:
//
//	VEC=/tmp/raw.bin VEC_PCS=1 VEC_RERANK=1 go test -run TestVecExperiment -v .   # rerank by cosine, by weight
//	VEC=/tmp/raw.bin VEC_PCS=1 go test -run TestVecExpand -v .                    # query expansion by nearest words
//	VEC=/tmp/raw.bin VEC_PCS=1 go test -run TestVecDocExpand -v .                 # document expansion
//	GRID=weight|unknown|fields|pool go test -run TestDenseGrid -v .              # the shipped rerank's parameters
//	DIFF=1 go test -run TestDenseDiff -v .                                       # queries the rerank changes
//
// VEC_DENSE sets the shipped rerank's weight under the first three (0:
// off); VEC_DESM=1 takes documents' vectors from the output vectors;
// VEC_STEMONLY=1 looks words up by stem; VEC_MAXSIM=1 scores by each
// query word's nearest document word. None reads the blind set.

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/internal/porter"
)

type rawVecs struct {
	d     int
	words []string
	count []int64
	vec   map[string][]float32
	stem  map[string][]float32
}

func loadRaw(t testing.TB, path string) *rawVecs {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = b[len("cxvec0\n"):]
	next := func() uint64 { v, n := binary.Uvarint(b); b = b[n:]; return v }
	n, d := int(next()), int(next())
	r := &rawVecs{d: d, vec: map[string][]float32{}, stem: map[string][]float32{}}
	mean := make([]float64, d)
	all := make([][]float32, n)
	for i := range n {
		l := next()
		w := string(b[:l])
		b = b[l:]
		c := next()
		v := make([]float32, d)
		for x := range v {
			v[x] = math.Float32frombits(binary.LittleEndian.Uint32(b))
			b = b[4:]
			mean[x] += float64(v[x]) / float64(n)
		}
		r.words = append(r.words, w)
		r.count = append(r.count, int64(c))
		all[i] = v
	}
	if os.Getenv("VEC_NOMEAN") == "" {
		for _, v := range all {
			for x := range v {
				v[x] -= float32(mean[x])
			}
		}
		npc := 0
		_, _ = fmt.Sscan(os.Getenv("VEC_PCS"), &npc)
		for range npc {
			// power iteration for the top principal direction
			u := make([]float64, d)
			for x := range u {
				u[x] = 1 / math.Sqrt(float64(d)) * float64(1+x%3)
			}
			for range 30 {
				nu := make([]float64, d)
				for _, v := range all {
					var p float64
					for x := range v {
						p += float64(v[x]) * u[x]
					}
					for x := range v {
						nu[x] += p * float64(v[x])
					}
				}
				var nn float64
				for _, y := range nu {
					nn += y * y
				}
				nn = math.Sqrt(nn)
				for x := range nu {
					u[x] = nu[x] / nn
				}
			}
			for _, v := range all {
				var p float64
				for x := range v {
					p += float64(v[x]) * u[x]
				}
				for x := range v {
					v[x] -= float32(p * u[x])
				}
			}
		}
		for _, v := range all {
			unitVec(v)
		}
	}
	defer func() {
		for _, v := range r.stem {
			unitVec(v)
		}
	}()
	for i, w := range r.words {
		r.vec[w] = all[i]
		st := porter.Stem(w)
		if os.Getenv("VEC_STEMAVG") != "" {
			v := r.stem[st]
			if v == nil {
				v = make([]float32, d)
				r.stem[st] = v
			}
			for x := range v {
				v[x] += float32(r.count[i]) * all[i][x]
			}
		} else if _, ok := r.stem[st]; !ok {
			r.stem[st] = all[i] // most frequent word of the stem
		}
	}
	return r
}

func unitVec(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s > 0 {
		inv := float32(1 / math.Sqrt(s))
		for i := range v {
			v[i] *= inv
		}
	}
}

var stemOnly = os.Getenv("VEC_STEMONLY") != ""

func (r *rawVecs) lookup(w string) []float32 {
	if v, ok := r.vec[w]; ok && !stemOnly {
		return v
	}
	return r.stem[porter.Stem(w)]
}

// embed sums weighted word vectors.
func (r *rawVecs) embed(dst []float32, ix *Index, text string, fw float32) {
	for _, w := range appendWords(nil, text) {
		if stopwords[w] {
			continue
		}
		v := r.lookup(w)
		if v == nil {
			continue
		}
		idf := float32(3)
		if id, ok := ix.terms[porter.Stem(w)]; ok {
			idf = ix.idf[id]
		}
		for x := range dst {
			dst[x] += fw * idf * v[x]
		}
	}
}

// startVecExperiment skips t unless VEC names raw vectors, sets the
// shipped rerank's weight to VEC_DENSE (0, off, when unset) until t ends,
// and returns the vectors' path and the dataset.
func startVecExperiment(t *testing.T) (string, *dataset) {
	t.Helper()
	path := os.Getenv("VEC")
	if path == "" {
		t.Skip("VEC unset")
	}
	w := denseWeight
	t.Cleanup(func() { denseWeight = w })
	denseWeight = 0
	_, _ = fmt.Sscan(os.Getenv("VEC_DENSE"), &denseWeight)
	return path, loadDataset(t)
}

// experimentSet is a set of queries an experiment reports on.
type experimentSet struct {
	name string
	qs   []labelledQuery
}

// experimentSets are the sets the experiments may be tuned on: the tuned
// set, the hold-out, the dev set and the tuned set's paraphrases.
func experimentSets(ds *dataset) []experimentSet {
	var para []labelledQuery
	for _, q := range ds.queries {
		if q.Kind == "paraphrase" {
			para = append(para, q)
		}
	}
	return []experimentSet{{"tuned", ds.queries}, {"holdout", ds.holdout}, {"dev", ds.dev}, {"tuned-para", para}}
}

func TestVecExpand(t *testing.T) {
	path, ds := startVecExperiment(t)
	r := loadRaw(t, path)
	sets := experimentSets(ds)
	var out strings.Builder
	type cfg struct {
		k     int
		theta float32
		alpha float32
	}
	for _, c := range []cfg{{0, 0, 0}, {5, 0.5, 0.5}, {10, 0.5, 0.5}, {10, 0.4, 0.5}, {10, 0.6, 0.5}, {10, 0.5, 0.3}, {10, 0.5, 0.7}, {20, 0.5, 0.5}} {
		var tv [][]float32
		var cache = map[string][]alt{}
		expHook = func(ix *Index, dst []alt, w string, own float32) []alt {
			if c.k == 0 {
				return dst
			}
			if tv == nil {
				tv = make([][]float32, len(ix.surface))
				for id, sw := range ix.surface {
					tv[id] = r.lookup(sw)
				}
			}
			if a, ok := cache[w]; ok {
				return append(dst, a...)
			}
			q := r.lookup(w)
			var best []alt
			if q != nil {
				for id, v := range tv {
					if v == nil {
						continue
					}
					var s float32
					for x := range v {
						s += v[x] * q[x]
					}
					if s < c.theta || s > 0.999 {
						continue
					}
					best = append(best, alt{int32(id), s})
				}
				slices.SortFunc(best, func(a, b alt) int { return int(math.Copysign(1, float64(b.weight-a.weight))) })
				if len(best) > c.k {
					best = best[:c.k]
				}
				for i := range best {
					wt := c.alpha * (best[i].weight - c.theta) / (1 - c.theta)
					if own >= 0 && ix.idf[best[i].term] > own {
						wt *= own / ix.idf[best[i].term]
					}
					best[i].weight = wt
				}
			}
			cache[w] = best
			return append(dst, best...)
		}
		ix := NewIndex(ds.docs)
		fmt.Fprintf(&out, "k %2d theta %.2f alpha %.2f:", c.k, c.theta, c.alpha)
		for _, s := range sets {
			m := measureRecall(ix.Search, s.qs)
			fmt.Fprintf(&out, "  %s %.3f/%.3f", s.name, m.r1, m.r5)
		}
		out.WriteString("\n")
	}
	expHook = nil
	t.Log("\n" + out.String())
}

func TestVecDocExpand(t *testing.T) {
	path, ds := startVecExperiment(t)
	r := loadRaw(t, path)
	ix0 := NewIndex(ds.docs)
	// candidate expansion words: vocabulary minus the most frequent
	type wv struct {
		w string
		v []float32
	}
	var cand []wv
	for i, w := range r.words {
		if i < 300 || len(w) < 3 || stopwords[w] {
			continue
		}
		if i > 30000 {
			break
		}
		cand = append(cand, wv{w, r.vec[w]})
	}
	cents := make([][]float32, len(ds.docs))
	for i := range ds.docs {
		d := &ix0.docs[i]
		v := make([]float32, r.d)
		r.embed(v, ix0, d.Tool, 2)
		r.embed(v, ix0, d.Description, 1)
		unitVec(v)
		cents[i] = v
	}
	sets := experimentSets(ds)
	var out strings.Builder
	for _, k := range []int{0, 5, 10, 20} {
		docs := slices.Clone(ds.docs)
		for i := range docs {
			if k == 0 {
				break
			}
			type sc struct {
				w string
				s float32
			}
			var best []sc
			for _, c := range cand {
				var s float32
				for x := range c.v {
					s += c.v[x] * cents[i][x]
				}
				if len(best) < k || s > best[len(best)-1].s {
					best = append(best, sc{c.w, s})
					slices.SortFunc(best, func(a, b sc) int { return int(math.Copysign(1, float64(b.s-a.s))) })
					if len(best) > k {
						best = best[:k]
					}
				}
			}
			var ws []string
			for _, b := range best {
				ws = append(ws, b.w)
			}
			docs[i].ServerDescription = strings.Join(ws, " ")
			if i < 3 || os.Getenv("VEC_SHOW") == docs[i].Tool {
				t.Logf("%s: %s", docs[i].Tool, docs[i].ServerDescription)
			}
		}
		ix := NewIndex(docs)
		fmt.Fprintf(&out, "docexp k %2d:", k)
		for _, s := range sets {
			m := measureRecall(ix.Search, s.qs)
			fmt.Fprintf(&out, "  %s %.3f/%.3f", s.name, m.r1, m.r5)
		}
		out.WriteString("\n")
	}
	t.Log("\n" + out.String())
}
