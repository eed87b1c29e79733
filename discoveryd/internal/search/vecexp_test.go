package search

// The experiments behind the dense rerank (docs/SEARCH.md, "tried"). They
// need raw vectors from internal/vecgen's -raw flag and are skipped
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

	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/porter"
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

func TestVecExperiment(t *testing.T) {
	path := os.Getenv("VEC")
	if path == "" {
		t.Skip("VEC unset")
	}
	defer func(w float32) { denseWeight = w }(denseWeight)
	denseWeight = 0
	_, _ = fmt.Sscan(os.Getenv("VEC_DENSE"), &denseWeight)
	ds := loadDataset(t)
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
					if h.Why == "exact name" || strings.HasPrefix(h.Why, "exact alias") || strings.HasPrefix(h.Why, "tool name in") {
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
	sets := []struct {
		name string
		qs   []labelledQuery
	}{{"tuned", ds.queries}, {"holdout", ds.holdout}, {"dev", ds.dev}}
	var para []labelledQuery
	for _, q := range ds.queries {
		if q.Kind == "paraphrase" {
			para = append(para, q)
		}
	}
	sets = append(sets, struct {
		name string
		qs   []labelledQuery
	}{"tuned-para", para})
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

func TestVecExpand(t *testing.T) {
	path := os.Getenv("VEC")
	if path == "" {
		t.Skip("VEC unset")
	}
	defer func(w float32) { denseWeight = w }(denseWeight)
	denseWeight = 0
	_, _ = fmt.Sscan(os.Getenv("VEC_DENSE"), &denseWeight)
	ds := loadDataset(t)
	r := loadRaw(t, path)
	sets := []struct {
		name string
		qs   []labelledQuery
	}{{"tuned", ds.queries}, {"holdout", ds.holdout}, {"dev", ds.dev}}
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
		var para []labelledQuery
		for _, q := range ds.queries {
			if q.Kind == "paraphrase" {
				para = append(para, q)
			}
		}
		m := measureRecall(ix.Search, para)
		fmt.Fprintf(&out, "  tuned-para %.3f/%.3f\n", m.r1, m.r5)
	}
	expHook = nil
	t.Log("\n" + out.String())
}

func TestVecDocExpand(t *testing.T) {
	path := os.Getenv("VEC")
	if path == "" {
		t.Skip("VEC unset")
	}
	defer func(w float32) { denseWeight = w }(denseWeight)
	denseWeight = 0
	_, _ = fmt.Sscan(os.Getenv("VEC_DENSE"), &denseWeight)
	ds := loadDataset(t)
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
	sets := []struct {
		name string
		qs   []labelledQuery
	}{{"tuned", ds.queries}, {"holdout", ds.holdout}, {"dev", ds.dev}}
	var para []labelledQuery
	for _, q := range ds.queries {
		if q.Kind == "paraphrase" {
			para = append(para, q)
		}
	}
	sets = append(sets, struct {
		name string
		qs   []labelledQuery
	}{"tuned-para", para})
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

func TestDenseGrid(t *testing.T) {
	if os.Getenv("GRID") == "" {
		t.Skip("GRID unset")
	}
	ds := loadDataset(t)
	var para []labelledQuery
	for _, q := range ds.queries {
		if q.Kind == "paraphrase" {
			para = append(para, q)
		}
	}
	sets := []struct {
		name string
		qs   []labelledQuery
	}{{"tuned", ds.queries}, {"holdout", ds.holdout}, {"dev", ds.dev}, {"tuned-para", para}}
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
