package search

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/codeexec/codeexec/discoveryd/internal/embed"
)

// benchModel loads the installed search model, reporting the heap it
// takes, or skips when there is none (scripts/search-model.sh).
func benchModel(b *testing.B) *embed.Model {
	b.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, err := embed.Load(embed.DefaultPath())
	if err != nil {
		b.Skipf("no search model: %v (run scripts/search-model.sh)", err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.Logf("search model: %d tokens x %d dims, %.1f MiB of heap", m.Tokens(), m.Dims(), float64(after.HeapAlloc-min(before.HeapAlloc, after.HeapAlloc))/(1<<20))
	return m
}

// BenchmarkHybrid measures one query, and building the index, at 1,000
// and 10,000 tools, by words alone and with the model, in one run so
// that the figures are comparable on a shared machine. The search
// reports the median query (p50-ns); the build, the live heap of one
// index (index-MiB).
//
//	go test -run '^$' -bench 'Hybrid' -benchtime 3s ./discoveryd/internal/search/
func BenchmarkHybrid(b *testing.B) {
	m := benchModel(b)
	ds := loadDataset(b)
	queries := make([]string, len(ds.queries))
	for i, q := range ds.queries {
		queries[i] = q.Query
	}
	for _, n := range []int{1000, 10000} {
		docs, _ := replicate(ds.docs, n)
		docs = docs[:n]
		for _, mode := range []struct {
			name string
			opts Options
		}{{"words", Options{}}, {"model", Options{Model: m}}} {
			ix := NewIndexWith(docs, mode.opts)
			b.Run(fmt.Sprintf("search-%d-%s", n, mode.name), func(b *testing.B) {
				benchQueries(b, queries, func(q string) { ix.Search(q, reportLimit) })
			})
			b.Run(fmt.Sprintf("build-%d-%s", n, mode.name), func(b *testing.B) {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.ReportAllocs()
				var ix *Index
				for b.Loop() {
					ix = NewIndexWith(docs, mode.opts)
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-min(before.HeapAlloc, after.HeapAlloc))/(1<<20), "index-MiB")
				runtime.KeepAlive(ix)
			})
		}
	}
}
