package search

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rssMiB is the process's resident memory, Go's heap and the runtime's
// native memory alike.
func rssMiB(tb testing.TB) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkHybrid measures one query, and building the index, at 1,000
// and 10,000 tools, by words alone and with the model, in one run so
// that the figures are comparable on a shared machine. A search with the
// model runs the model on every query (no cache); it reports the median
// (p50-ns). embed-N is the once-only cost of the tools' vectors, one
// tool at a time on one thread, as discoveryd makes them; build-N-model
// builds the index from vectors already made (a restart, with the
// catalogue's copy). rss-MiB is the process's resident memory after the
// model made every vector, against before it was opened.
//
//	go test -run '^$' -bench 'Hybrid' -benchtime 3s ./discoveryd/internal/search/
func BenchmarkHybrid(b *testing.B) {
	ds := loadDataset(b)
	NewIndex(ds.docs[:1]) // the lexicon and word vectors, parsed once
	runtime.GC()
	rss0 := rssMiB(b)
	enc := installedEncoder(b)
	queries := make([]string, len(ds.queries))
	for i, q := range ds.queries {
		queries[i] = q.Query
	}
	noCache := &Semantic{Dims: enc.Dims(), Query: func(q string) ([]float32, error) {
		vs, err := enc.Encode([]string{q})
		if err != nil {
			return nil, err
		}
		return vs[0], nil
	}}
	for _, n := range []int{1000, 10000} {
		docs, _ := replicate(ds.docs, n)
		docs = docs[:n]
		// Made once, outside the benchmark loop: at 10,000 tools it takes
		// most of a minute.
		texts := make([]string, n)
		for i := range docs {
			texts[i] = ModelText(&docs[i])
		}
		began := time.Now()
		vs, err := enc.Encode(texts)
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(began)
		sem := &Semantic{Dims: enc.Dims(), Query: noCache.Query}
		for _, v := range vs {
			sem.Vectors = append(sem.Vectors, v...)
		}
		runtime.GC()
		rss := rssMiB(b) - rss0
		b.Run(fmt.Sprintf("embed-%d", n), func(b *testing.B) {
			for b.Loop() {
			}
			b.ReportMetric(took.Seconds(), "s")
			b.ReportMetric(rss, "rss-MiB")
		})
		for _, mode := range []struct {
			name string
			opts Options
		}{{"words", Options{}}, {"model", Options{Semantic: sem}}} {
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
