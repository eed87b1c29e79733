package search

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/lexicon"
	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/wordvec"
	"github.com/codeexec/codeexec/services/testenv"
)

// Benchmark targets from issue 3 and the field survey §10.
const (
	targetRecall5  = 0.95
	latencyCorpus  = 10000
	reportLimit    = 5
	bytesPerToken  = 4 // token estimate: bytes/4 of compact JSON
	latencyRepeats = 20
)

// replicaSuffixes vary server names when the corpus is replicated to reach
// latencyCorpus tools, the way one organisation configures several
// instances of the same server.
var replicaSuffixes = []string{
	"prod", "staging", "dev", "eu", "us", "apac", "team-a", "team-b", "internal",
	"sandbox", "legacy", "mirror", "backup", "qa", "ops", "research", "partner",
	"archive", "canary", "edge", "west", "east", "north", "south",
}

// replicate grows docs to n documents by copying the corpus under varied
// server names. base maps each server name to the one it copies.
func replicate(docs []Doc, n int) (out []Doc, base map[string]string) {
	out = make([]Doc, 0, n)
	out = append(out, docs...)
	base = map[string]string{}
	for _, d := range docs {
		base[d.Server] = d.Server
	}
	for r := 0; len(out) < n; r++ {
		sfx := replicaSuffixes[r%len(replicaSuffixes)]
		if r >= len(replicaSuffixes) {
			sfx = fmt.Sprintf("%s%d", sfx, r/len(replicaSuffixes))
		}
		for _, d := range docs {
			if len(out) == n {
				break
			}
			orig := d.Server
			d.Server = orig + "-" + sfx
			d.ServerAlias = alias(d.Server)
			base[d.Server] = orig
			out = append(out, d)
		}
	}
	return out, base
}

// latencyReps is how often latency runs each query.
func latencyReps() int {
	if raceEnabled {
		return 1
	}
	return latencyRepeats
}

// latency runs every query latencyReps times against ix and returns the
// p50 and p99 of single-query wall time.
func latency(ix *Index, queries []string, limit int) (p50, p99 time.Duration) {
	var ds []time.Duration
	for range latencyReps() {
		for _, q := range queries {
			start := time.Now()
			ix.Search(q, limit)
			ds = append(ds, time.Since(start))
		}
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*99/100]
}

// measureBuild builds an index over docs and reports how long that took and
// how much live heap the index holds.
func measureBuild(docs []Doc) (time.Duration, uint64, *Index) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	ix := NewIndex(docs)
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	ix.Search("warm the pool", 1) // one scratch, as a serving index has
	return took, after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc), ix
}

// summaryDoc and fullDoc are upstream's query_tool_docs shapes.
type summaryDoc struct {
	Server      string `json:"server"`
	ServerAlias string `json:"serverAlias"`
	Tool        string `json:"tool"`
	ToolAlias   string `json:"toolAlias"`
	Description string `json:"description,omitempty"`
}

type fullDoc struct {
	summaryDoc
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

func tokens(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return (len(b) + bytesPerToken - 1) / bytesPerToken
}

// tokenFigures estimates what the model reads: every schema listed as
// tools/list returns them, against one discovery round per query (the top
// reportLimit results in summary detail with total/truncated, then the full
// doc of the first relevant tool).
func tokenFigures(ds *dataset, ix *Index) (listAll, roundMean int) {
	type listed struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	var all []listed
	schemas := map[string]json.RawMessage{}
	for _, s := range ds.servers {
		for _, tl := range s.Tools {
			all = append(all, listed(tl))
			schemas[s.Server+"/"+tl.Name] = tl.InputSchema
		}
	}
	listAll = tokens(map[string]any{"tools": all})
	sum := 0
	for _, q := range ds.queries {
		res := ix.Search(q.Query, reportLimit)
		var results []summaryDoc
		for _, h := range res.Hits {
			results = append(results, summaryOf(h.Doc))
		}
		sum += tokens(map[string]any{"results": results, "total": res.Total, "truncated": res.Truncated})
		server, tool, _ := strings.Cut(q.Relevant[0], "/")
		for _, d := range ds.docs {
			if d.Server == server && d.Tool == tool {
				sum += tokens(map[string]any{"docs": []fullDoc{{summaryOf(&d), schemas[q.Relevant[0]]}}})
			}
		}
	}
	return listAll, sum / len(ds.queries)
}

func summaryOf(d *Doc) summaryDoc {
	return summaryDoc{d.Server, d.ServerAlias, d.Tool, d.ToolAlias, d.Description}
}

// builtFor are the query kinds that the engine meets targetRecall5 on.
var builtFor = map[string]bool{"natural": true, "synonym": true, "typo": true, "exact": true}

// TestSearchReport is the search benchmark. Run it with -v to print the
// table:
//
//	go test -run TestSearchReport -v ./discoveryd/internal/search/
//
// It asserts only deterministic figures (recall, exact-name rate); the
// latency it prints is a measurement, not a pass condition.
func TestSearchReport(t *testing.T) {
	testenv.Slow(t)
	ds := loadDataset(t)
	ix := NewIndex(ds.docs)
	ours := ix.Search
	base := func(q string, limit int) Result { return Baseline(ds.docs, q, limit) }

	var out strings.Builder
	fmt.Fprintf(&out, "corpus: %d tools from %d servers; %d labelled queries (+%d held out, +%d dev, +%d blind)\n", len(ds.docs), len(ds.servers), len(ds.queries), len(ds.holdout), len(ds.dev), len(ds.blind))
	fmt.Fprintf(&out, "%-18s %5s  %9s %9s  %9s %9s\n", "queries", "n", "ours@1", "ours@5", "base@1", "base@5")
	row := func(name string, qs []labelledQuery) recallRow {
		o, b := measureRecall(ours, qs), measureRecall(base, qs)
		fmt.Fprintf(&out, "%-18s %5d  %9.3f %9.3f  %9.3f %9.3f\n", name, o.n, o.r1, o.r5, b.r1, b.r5)
		return o
	}
	// Each set by kind, then all of it. The blind set's rows are aggregates
	// only: none of its misses is ever printed.
	bySet := func(set string, qs []labelledQuery) recallRow {
		kinds := map[string][]labelledQuery{}
		for _, q := range qs {
			kinds[q.Kind] = append(kinds[q.Kind], q)
		}
		if len(kinds) > 1 {
			for _, k := range slices.Sorted(maps.Keys(kinds)) {
				row(set+" "+k, kinds[k])
			}
		}
		return row(set+" all", qs)
	}
	all := bySet("tuned", ds.queries)
	bySet("holdout", ds.holdout)
	bySet("dev", ds.dev)
	bySet("blind", ds.blind)

	bare, qual, fails := exactNameRate(ix, ds.docs)
	fmt.Fprintf(&out, "exact name -> first: %.1f%% (bare name, tied names share the top block), %.1f%% (server/tool at rank 1)\n", 100*bare, 100*qual)

	typoRate, typoFirst, typoN, typoFails := typoNameRate(ix, ds.docs)
	fmt.Fprintf(&out, "misspelt name (words split, two letters swapped in the longest) -> top %d: %.1f%% of %d tools, first %.1f%%\n", reportLimit, 100*typoRate, typoN, 100*typoFirst)

	bigDocs, origin := replicate(ds.docs, latencyCorpus)
	build, heap, big := measureBuild(bigDocs)
	var qs []string
	hit1 := 0
	for _, q := range ds.queries {
		qs = append(qs, q.Query)
		if h := big.Search(q.Query, 1).Hits; len(h) > 0 && slices.Contains(q.Relevant, origin[h[0].Doc.Server]+"/"+h[0].Doc.Tool) {
			hit1++
		}
	}
	p50, p99 := latency(big, qs, reportLimit)
	fmt.Fprintf(&out, "index of %d tools: built in %v, %.1f MiB of heap\n", big.Len(), build.Round(time.Millisecond), float64(heap)/(1<<20))
	lx := lexicon.Embedded().Stats()
	fmt.Fprintf(&out, "lexicon (shared by every index): %d entries, %d relations, %d common words; %.1f MiB in the binary, %.1f MiB of heap once parsed\n",
		lx.Entries, lx.Relations, lx.CommonWords, float64(lx.FileBytes)/(1<<20), float64(lx.HeapBytes)/(1<<20))
	wv := wordvec.Embedded().Stats()
	fmt.Fprintf(&out, "word vectors (shared by every index): %d words x %d dimensions; %.1f MiB in the binary, %.1f MiB of heap once parsed\n",
		wv.Words, wv.Dims, float64(wv.FileBytes)/(1<<20), float64(wv.HeapBytes)/(1<<20))
	fmt.Fprintf(&out, "latency over %d tools, %d queries x %d, limit %d: p50 %v, p99 %v\n", big.Len(), len(qs), latencyReps(), reportLimit, p50, p99)
	p50, p99 = latency(big, qs, 0)
	fmt.Fprintf(&out, "  the same with no limit (every match ranked and returned): p50 %v, p99 %v\n", p50, p99)
	fmt.Fprintf(&out, "at %d tools (the corpus plus %.1f copies under other server names), first hit is a copy of a relevant tool: %.3f\n",
		big.Len(), float64(len(bigDocs)-len(ds.docs))/float64(len(ds.docs)), float64(hit1)/float64(len(ds.queries)))

	listAll, round := tokenFigures(ds, ix)
	fmt.Fprintf(&out, "tokens (bytes/%d of compact JSON): tools/list of all %d tools %d; one discovery round (top %d summaries + full doc of one tool), mean %d (%.1f%% of listing all)\n",
		bytesPerToken, len(ds.docs), listAll, reportLimit, round, 100*float64(round)/float64(listAll))
	if raceEnabled {
		out.WriteString("(race detector on: timings are not representative)\n")
	}
	t.Log("\n" + out.String())
	if testing.Verbose() {
		for _, m := range all.misses5 {
			t.Logf("miss@5: %s", m)
		}
		for _, m := range typoFails {
			t.Logf("misspelt name missed: %s", m)
		}
	}

	if bare < 1 || qual < 1 {
		t.Errorf("exact-name rate %.3f / %.3f, want 1; failures: %v", bare, qual, fails)
	}
	if typoRate < 1 {
		t.Errorf("misspelt names in the top %d: %.4f, want 1; missed: %v", reportLimit, typoRate, typoFails)
	}
	// Paraphrases and multi-server needs (issue 15) are reported above,
	// short of the target (docs/SEARCH.md); the target holds for the kinds
	// the engine was first built for.
	var worded []labelledQuery
	for _, q := range ds.queries {
		if builtFor[q.Kind] {
			worded = append(worded, q)
		}
	}
	if r := measureRecall(ours, worded); r.r5 < targetRecall5 {
		t.Errorf("recall@5 on natural, synonym, typo and exact queries = %.3f, want >= %.2f", r.r5, targetRecall5)
	}
}

// TestSearchTuning prints recall on the sets the engine may be tuned on
// or chosen by: the tuned set, the hold-out and the dev set, by kind, and
// never the blind set. Run it with -v while changing the ranking:
//
//	go test -count=1 -run TestSearchTuning -v ./discoveryd/internal/search/
func TestSearchTuning(t *testing.T) {
	ds := loadDataset(t)
	ix := NewIndex(ds.docs)
	var out strings.Builder
	fmt.Fprintf(&out, "%-18s %5s  %9s %9s\n", "queries", "n", "ours@1", "ours@5")
	var misses []string
	for _, set := range []struct {
		name string
		qs   []labelledQuery
	}{{"tuned", ds.queries}, {"holdout", ds.holdout}, {"dev", ds.dev}} {
		kinds := map[string][]labelledQuery{"all": set.qs}
		for _, q := range set.qs {
			kinds[q.Kind] = append(kinds[q.Kind], q)
		}
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			if k != "all" && len(kinds[k]) == len(set.qs) {
				continue
			}
			r := measureRecall(ix.Search, kinds[k])
			fmt.Fprintf(&out, "%-18s %5d  %9.3f %9.3f\n", set.name+" "+k, r.n, r.r1, r.r5)
			if k == "all" {
				for _, m := range r.misses5 {
					misses = append(misses, set.name+": "+m)
				}
			}
		}
	}
	typoRate, typoFirst, typoN, typoFails := typoNameRate(ix, ds.docs)
	fmt.Fprintf(&out, "misspelt name -> top %d: %.1f%% of %d tools, first %.1f%% %v\n", reportLimit, 100*typoRate, typoN, 100*typoFirst, typoFails)
	t.Log("\n" + out.String())
	if os.Getenv("SEARCH_MISSES") != "" {
		for _, m := range misses {
			t.Logf("miss@5: %s", m)
		}
	}
}

// BenchmarkSearch10k measures one query over a 10,000-tool index, and
// beside it, in the same run, the index without its dense rerank (what
// the rerank costs), upstream's substring search over the same tools (a
// reference for the machine's speed at the time) and the index with its
// pooled scratch memory thrown away after every query (what the pool
// saves). Each reports the median query (p50-ns) beside the mean (ns/op):
// the target of issue 15 is on the median.
//
//	go test -run '^$' -bench 'Search10k|NewIndex10k' -benchtime 3s -count 3 ./discoveryd/internal/search/
func BenchmarkSearch10k(b *testing.B) {
	ds := loadDataset(b)
	docs, _ := replicate(ds.docs, latencyCorpus)
	ix := NewIndex(docs)
	queries := make([]string, len(ds.queries))
	for i, q := range ds.queries {
		queries[i] = q.Query
	}
	b.Run("index", func(b *testing.B) {
		benchQueries(b, queries, func(q string) { ix.Search(q, reportLimit) })
	})
	b.Run("index-without-rerank", func(b *testing.B) {
		defer func(w float32) { denseWeight = w }(denseWeight)
		denseWeight = 0
		benchQueries(b, queries, func(q string) { ix.Search(q, reportLimit) })
	})
	b.Run("index-unpooled", func(b *testing.B) {
		benchQueries(b, queries, func(q string) {
			ix.Search(q, reportLimit)
			ix.pool.Get() // drop the scratch the query put back
		})
	})
	b.Run("upstream", func(b *testing.B) {
		benchQueries(b, queries, func(q string) { Baseline(docs, q, reportLimit) })
	})
}

// benchQueries runs search over queries in turn, one a loop, and reports
// the median single call as p50-ns.
func benchQueries(b *testing.B, queries []string, search func(string)) {
	b.ReportAllocs()
	var took []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		search(queries[i%len(queries)])
		took = append(took, time.Since(start))
		i++
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
}

// BenchmarkNewIndex10k measures building a 10,000-tool index (the lexicon
// and the word vectors are parsed once per process, before the timer
// starts), and reports the live heap one index holds (index-MiB).
func BenchmarkNewIndex10k(b *testing.B) {
	docs, _ := replicate(loadDataset(b).docs, latencyCorpus)
	NewIndex(docs[:1])
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	var ix *Index
	for b.Loop() {
		ix = NewIndex(docs)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-min(before.HeapAlloc, after.HeapAlloc))/(1<<20), "index-MiB")
	runtime.KeepAlive(ix)
}
