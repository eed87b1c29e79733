package search

import (
	"errors"
	"io/fs"
	"sync"
	"testing"

	"github.com/codeexec/codeexec/discoveryd/internal/embed"
)

// The installed model, opened once per test process, and the vectors it
// made for texts so far, so that tests and benchmarks embed each text
// once.
var testModel struct {
	once sync.Once
	enc  *embed.Encoder
	err  error
	mu   sync.Mutex
	vecs map[string][]float32
}

// installedEncoder returns the model scripts/search-model.sh installed,
// or skips when there is none or this build cannot run it.
func installedEncoder(tb testing.TB) *embed.Encoder {
	tb.Helper()
	testModel.once.Do(func() {
		testModel.enc, testModel.err = embed.Open(embed.DefaultPath())
		testModel.vecs = map[string][]float32{}
	})
	if err := testModel.err; errors.Is(err, fs.ErrNotExist) || errors.Is(err, embed.ErrNoRuntime) {
		tb.Skipf("no search model: %v (run scripts/search-model.sh)", err)
	} else if err != nil {
		tb.Fatal(err)
	}
	return testModel.enc
}

// modelText is what modelSemantic gives the model of a tool: ModelText,
// or an experiment's variant (TestSemanticGrid's MODELTEXT).
var modelText = ModelText

// modelSemantic embeds docs with the installed model, as discoveryd does.
func modelSemantic(tb testing.TB, docs []Doc) *Semantic {
	tb.Helper()
	enc := installedEncoder(tb)
	sem := &Semantic{Dims: enc.Dims(), Vectors: make([]float32, 0, len(docs)*enc.Dims()), Query: enc.NewQueryCache(256).Vector}
	for i := range docs {
		text := modelText(&docs[i])
		testModel.mu.Lock()
		v, ok := testModel.vecs[text]
		testModel.mu.Unlock()
		if !ok {
			vs, err := enc.Encode([]string{text})
			if err != nil {
				tb.Fatal(err)
			}
			v = vs[0]
			testModel.mu.Lock()
			testModel.vecs[text] = v
			testModel.mu.Unlock()
		}
		sem.Vectors = append(sem.Vectors, v...)
	}
	return sem
}
