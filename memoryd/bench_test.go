package memoryd_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/pgtest"
)

// benchValue is a typical small memory: a few fields of agent state.
const benchValue = `{"step":42,"status":"running","notes":"fetched 3 pages, next: parse tables","done":[1,2,3]}`

// reportLatency adds p50 and p99 in microseconds to the benchmark output.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// benchStores are the stores the benchmarks compare in one run: the
// bbolt file and a PostgreSQL database on a local server (loopback TCP,
// fsync on), each behind the same gRPC handlers.
func benchStores(b *testing.B, bench func(b *testing.B, cfg memoryd.Config)) {
	for _, st := range []struct {
		name string
		cfg  func(b *testing.B) memoryd.Config
	}{
		{"bolt", func(*testing.B) memoryd.Config { return memoryd.Config{} }},
		{"postgres", func(b *testing.B) memoryd.Config { return memoryd.Config{Store: pgtest.NewDatabase(b)} }},
	} {
		b.Run("store="+st.name, func(b *testing.B) { bench(b, st.cfg(b)) })
	}
}

// BenchmarkLoad is load_memory: GetMemory over gRPC (bufconn) on a
// database of 1000 records.
func BenchmarkLoad(b *testing.B) { benchStores(b, benchLoad) }

func benchLoad(b *testing.B, cfg memoryd.Config) {
	e := start(b, cfg)
	for i := range 1000 {
		e.save(b, "", fmt.Sprintf("k%d", i), benchValue, `{"source":"bench"}`)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if _, err := e.mem.GetMemory(b.Context(), &memoryv1.GetMemoryRequest{Key: fmt.Sprintf("k%d", i%1000)}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	reportLatency(b, lat)
}

// BenchmarkSave is save_memory from one writer: SaveMemory over gRPC
// (bufconn), each acknowledged only after fsync.
func BenchmarkSave(b *testing.B) { benchStores(b, benchSave) }

func benchSave(b *testing.B, cfg memoryd.Config) {
	e := start(b, cfg)
	lat := make([]time.Duration, 0, b.N)
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if _, err := e.mem.SaveMemory(b.Context(), &memoryv1.SaveMemoryRequest{Key: fmt.Sprintf("k%d", i%1000), ValueJson: benchValue}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	reportLatency(b, lat)
}

// BenchmarkDurableSaves measures acknowledged (fsynced) saves per second
// over gRPC with 1 and 16 concurrent writers. The group commit lets the 16
// writers share fsyncs; the issue asks for at least 5× the single rate.
// PostgreSQL's concurrent commits share WAL flushes the same way.
func BenchmarkDurableSaves(b *testing.B) { benchStores(b, benchDurableSaves) }

func benchDurableSaves(b *testing.B, base memoryd.Config) {
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			reg := prometheus.NewRegistry()
			cfg := base
			cfg.Registerer = reg
			if cfg.Store != "" {
				cfg.Store = pgtest.NewDatabase(b)
			}
			e := start(b, cfg)
			var next atomic.Int64
			var mu sync.Mutex
			lat := make([]time.Duration, 0, b.N)
			var wg sync.WaitGroup
			b.ResetTimer()
			t0 := time.Now()
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					mine := make([]time.Duration, 0, b.N/writers+1)
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							break
						}
						s := time.Now()
						_, err := e.mem.SaveMemory(b.Context(), &memoryv1.SaveMemoryRequest{Key: fmt.Sprintf("w%d-%d", w, i%1000), ValueJson: benchValue})
						if err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(s))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			elapsed := time.Since(t0)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "saves/s")
			if cfg.Store == "" {
				b.ReportMetric(meanCommitWrites(b, reg), "writes/commit")
			}
			reportLatency(b, lat)
		})
	}
}

// BenchmarkBatchingGain measures the 16-writer/1-writer ratio of durable
// saves over gRPC in alternating 200ms windows, so that slow drift in disk
// speed (shared machines) hits both sides alike. Each iteration is one
// pair of windows; run it with -benchtime 10x.
func BenchmarkBatchingGain(b *testing.B) {
	e := start(b, memoryd.Config{})
	const window = 200 * time.Millisecond
	run := func(writers int) int64 {
		var done atomic.Int64
		var wg sync.WaitGroup
		stop := time.Now().Add(window)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(stop); i++ {
					if _, err := e.mem.SaveMemory(b.Context(), &memoryv1.SaveMemoryRequest{Key: fmt.Sprintf("w%d-%d", w, i%1000), ValueJson: benchValue}); err != nil {
						b.Error(err)
						return
					}
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		return done.Load()
	}
	var one, sixteen int64
	for b.Loop() {
		one += run(1)
		sixteen += run(16)
	}
	secs := float64(b.N) * window.Seconds()
	b.ReportMetric(float64(one)/secs, "1w-saves/s")
	b.ReportMetric(float64(sixteen)/secs, "16w-saves/s")
	b.ReportMetric(float64(sixteen)/float64(one), "gain-x")
}

// BenchmarkSharedFile compares load_memory and save_memory through the
// process that owns the database with the same calls through another
// process that shares it: the second goes over the owner's unix socket
// (StoreService) before the same bbolt transaction. Both memoryds run in
// this process, but the socket hop is the real one.
func BenchmarkSharedFile(b *testing.B) {
	owner := start(b, memoryd.Config{})
	follower := start(b, memoryd.Config{Path: owner.path})
	if !owner.svc.Owner() || follower.svc.Owner() {
		b.Fatal("the second memoryd does not share the first one's file")
	}
	for i := range 1000 {
		owner.save(b, "", fmt.Sprintf("k%d", i), benchValue, `{"source":"bench"}`)
	}
	for _, via := range []struct {
		name string
		e    *env
	}{{"owner", owner}, {"non-owner", follower}} {
		b.Run("load/"+via.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				if _, err := via.e.mem.GetMemory(b.Context(), &memoryv1.GetMemoryRequest{Key: fmt.Sprintf("k%d", i%1000)}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			reportLatency(b, lat)
		})
		b.Run("save/"+via.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				if _, err := via.e.mem.SaveMemory(b.Context(), &memoryv1.SaveMemoryRequest{Key: fmt.Sprintf("k%d", i%1000), ValueJson: benchValue}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			reportLatency(b, lat)
		})
	}
}
