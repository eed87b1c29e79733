package search

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

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
