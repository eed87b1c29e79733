package bolt

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

// BenchmarkDurablePut measures fsynced Puts per second straight on the
// store, with 1 and 16 concurrent writers, to show what the group commit
// buys without gRPC in the way.
func BenchmarkDurablePut(b *testing.B) {
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "m.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var next atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			b.ResetTimer()
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						key := fmt.Sprintf("w%d-%d", w, i)
						if _, err := s.Put(b.Context(), "default", store.KindMemory, key, store.Write{Value: []byte(`{"n":1}`), Meta: []byte("{}")}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "saves/s")
			c, w := s.CommitStats()
			b.ReportMetric(float64(w)/float64(c), "writes/commit")
		})
	}
}
