package search

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/internal/porter"
)

// The experiments with the dense rerank itself (see vecexp_test.go for how
// to run them): reranking by the raw vectors' cosine, the shipped rerank's
// parameters, and the queries it changes.

func TestVecExperiment(t *testing.T) {
	path, ds := startVecExperiment(t)
	ix := NewIndex(ds.docs)
	r := loadRaw(t, path)
	rd := r
	if os.Getenv("VEC_DESM") != "" {
		rd = loadRaw(t, path+".out")
	}
	nameW, paramW := float32(2), float32(0.3)
	_, _ = fmt.Sscan(os.Getenv("VEC_NAMEW"), &nameW)
	pool := 30
	_, _ = fmt.Sscan(os.Getenv("VEC_POOL"), &pool)
	rerankOnly := os.Getenv("VEC_RERANK") != ""
	maxsim := os.Getenv("VEC_MAXSIM") != ""
	docWords := make([][][]float32, len(ix.docs))
	for i := range ix.docs {
		d := &ix.docs[i]
		for _, w := range appendWords(nil, d.Tool+" "+d.Description) {
			if v := r.lookup(w); v != nil && !stopwords[w] {
				docWords[i] = append(docWords[i], v)
			}
		}
	}
	dv := make([][]float32, len(ix.docs))
	for i := range ix.docs {
		d := &ix.docs[i]
		v := make([]float32, r.d)
		rd.embed(v, ix, d.Tool, nameW)
		rd.embed(v, ix, d.Description, 1)
		rd.embed(v, ix, strings.Join(d.Params, " "), paramW)
		rd.embed(v, ix, d.ParamText, paramW*0.66)
		unitVec(v)
		dv[i] = v
	}
	docIndex := map[*Doc]int{}
	for i := range ix.docs {
		docIndex[&ix.docs[i]] = i
	}
	type scored struct {
		doc int
		s   float64
	}
	search := func(lambda float64, pool int) searcher {
		return func(q string, limit int) Result {
			qv := make([]float32, r.d)
			var words []string
			for _, w := range appendRuns(nil, q) {
				if !stopwords[strings.ToLower(w)] {
					words = append(words, w)
				}
			}
			r.embed(qv, ix, strings.Join(words, " "), 1)
			unitVec(qv)
			cos := make([]float64, len(dv))
			if maxsim {
				var qws [][]float32
				var qw []float32
				for _, w := range words {
					w = strings.ToLower(w)
					if v := r.lookup(w); v != nil {
						qws = append(qws, v)
						idf := float32(3)
						if id, ok := ix.terms[porter.Stem(w)]; ok {
							idf = ix.idf[id]
						}
						qw = append(qw, idf)
					}
				}
				res := ix.Search(q, pool)
				for _, h := range res.Hits {
					i := docIndex[h.Doc]
					var tot, wsum float32
					for k, qv := range qws {
						best := float32(-1)
						for _, dvv := range docWords[i] {
							var s float32
							for x := range dvv {
								s += dvv[x] * qv[x]
							}
							best = max(best, s)
						}
						tot += qw[k] * best
						wsum += qw[k]
					}
					if wsum > 0 {
						cos[i] = float64(tot / wsum)
					}
				}
			} else {
				for i, v := range dv {
					var s float32
					for x := range v {
						s += v[x] * qv[x]
					}
					cos[i] = float64(s)
				}
			}
			res := ix.Search(q, 0)
			var top float64
			tier := map[int]float64{}
			bm := map[int]float64{}
			for _, h := range res.Hits {
				i := docIndex[h.Doc]
				bm[i] = h.Score
			}
			// scores above the scored maximum are tiers
			var maxS float64
			if len(res.Hits) > 0 {
				// recompute max of non-tier: tier docs have score >= maxScore+1
				for _, h := range res.Hits {
					if h.Why == "exact name" || strings.HasPrefix(h.Why, "exact alias") || strings.HasPrefix(h.Why, "tool name in") || h.Why == "misspelt tool name" {
						tier[docIndex[h.Doc]] = h.Score
						continue
					}
					maxS = max(maxS, h.Score)
				}
			}
			_ = top
			var c []scored
			// candidates: BM25 top pool plus dense top pool
			cands := map[int]bool{}
			for k, h := range res.Hits {
				if k < pool {
					cands[docIndex[h.Doc]] = true
				}
			}
			idx := make([]int, len(dv))
			for i := range idx {
				idx[i] = i
			}
			slices.SortFunc(idx, func(a, b int) int { return int(math.Copysign(1, cos[b]-cos[a])) })
			if !rerankOnly {
				for _, i := range idx[:pool] {
					cands[i] = true
				}
			}
			for i := range cands {
				s := 0.0
				if _, ok := tier[i]; ok {
					s = 1000 + tier[i]
				} else {
					if maxS > 0 {
						s = (1 - lambda) * bm[i] / maxS
					}
					s += lambda * cos[i]
				}
				c = append(c, scored{i, s})
			}
			slices.SortFunc(c, func(a, b scored) int {
				if a.s != b.s {
					return int(math.Copysign(1, b.s-a.s))
				}
				return a.doc - b.doc
			})
			var out Result
			for k := 0; k < len(c) && k < limit; k++ {
				out.Hits = append(out.Hits, Hit{Doc: &ix.docs[c[k].doc], Score: c[k].s})
			}
			return out
		}
	}
	sets := experimentSets(ds)
	var out strings.Builder
	for _, lam := range []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1} {
		fmt.Fprintf(&out, "lambda %.1f:", lam)
		for _, s := range sets {
			m := measureRecall(search(lam, pool), s.qs)
			fmt.Fprintf(&out, "  %s %.3f/%.3f", s.name, m.r1, m.r5)
		}
		out.WriteString("\n")
	}
	t.Log("\n" + out.String())
}

func TestDenseGrid(t *testing.T) {
	if os.Getenv("GRID") == "" {
		t.Skip("GRID unset")
	}
	ds := loadDataset(t)
	sets := experimentSets(ds)
	w0, p0, u0, f0 := denseWeight, densePool, denseUnknownIDF, vecFieldWeight
	defer func() { denseWeight, densePool, denseUnknownIDF, vecFieldWeight = w0, p0, u0, f0 }()
	var out strings.Builder
	row := func(label string) {
		ix := NewIndex(ds.docs)
		fmt.Fprintf(&out, "%-28s", label)
		for _, s := range sets {
			m := measureRecall(ix.Search, s.qs)
			fmt.Fprintf(&out, "  %s %.3f/%.3f", s.name, m.r1, m.r5)
		}
		out.WriteString("\n")
	}
	switch os.Getenv("GRID") {
	case "weight":
		for _, w := range []float32{0, 0.3, 0.4, 0.5, 0.6} {
			denseWeight = w
			row(fmt.Sprintf("weight %.2f", w))
		}
	case "unknown":
		for _, u := range []float32{0, 1.5, 3, 5, 8} {
			denseUnknownIDF = u
			row(fmt.Sprintf("unknown idf %.1f", u))
		}
	case "fields":
		for _, fs := range [][numFields]float32{
			{2, 0, 1, 0.3, 0.2, 0},
			{2, 0.5, 1, 0.3, 0.2, 0.3},
			{2, 1, 1, 0.3, 0.2, 0},
			{2, 0, 1, 0, 0, 0},
			{2, 0, 1, 0.6, 0.4, 0},
			{1.5, 0, 1, 0.3, 0.2, 0},
		} {
			vecFieldWeight = fs
			row(fmt.Sprint(fs))
		}
	case "pool":
		for _, p := range []int{10, 20, 30, 50, 100} {
			densePool = p
			row(fmt.Sprintf("pool %d", p))
		}
	}
	t.Log("\n" + out.String())
}

func TestDenseDiff(t *testing.T) {
	if os.Getenv("DIFF") == "" {
		t.Skip("DIFF unset")
	}
	ds := loadDataset(t)
	ix := NewIndex(ds.docs)
	w0 := denseWeight
	defer func() { denseWeight = w0 }()
	for _, set := range [][]labelledQuery{ds.queries, ds.holdout, ds.dev} {
		for _, q := range set {
			denseWeight = 0
			a := ix.Search(q.Query, 5)
			denseWeight = w0
			b := ix.Search(q.Query, 5)
			a1, b1 := recallAt(a.Hits, q.Relevant, 1), recallAt(b.Hits, q.Relevant, 1)
			a5, b5 := recallAt(a.Hits, q.Relevant, 5), recallAt(b.Hits, q.Relevant, 5)
			if a1 != b1 || a5 != b5 {
				top := func(r Result) string {
					var s []string
					for _, h := range r.Hits {
						s = append(s, h.Doc.Server+"/"+h.Doc.Tool)
					}
					return strings.Join(s, " ")
				}
				t.Logf("%s %q @1 %.2f->%.2f @5 %.2f->%.2f want %v\n   before %s\n   after  %s", q.Kind, q.Query, a1, b1, a5, b5, q.Relevant, top(a), top(b))
			}
		}
	}
}
