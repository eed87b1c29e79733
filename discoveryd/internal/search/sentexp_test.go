package search

// The sentence-encoder experiment of docs/SEARCH.md ("A sentence encoder
// from npm"): scripts/search-sentence-encoder.sh runs this test with
// SENTENCE_DUMP set, then scores the dump with the Universal Sentence
// Encoder. Without SENTENCE_DUMP it is skipped. It never reads the blind
// set.

import (
	"encoding/json"
	"os"
	"testing"
)

// TestSentenceEncoderDump writes, for every query of the tuned set, the
// hold-out and the dev set, the engine's 30 best tools as "server/tool",
// in order, to the JSON file SENTENCE_DUMP names: {"dev": {query: [...]}}.
func TestSentenceEncoderDump(t *testing.T) {
	path := os.Getenv("SENTENCE_DUMP")
	if path == "" {
		t.Skip("set SENTENCE_DUMP (scripts/search-sentence-encoder.sh does)")
	}
	ds := loadDataset(t)
	ix := NewIndex(ds.docs)
	out := map[string]map[string][]string{}
	for name, qs := range map[string][]labelledQuery{"dev": ds.dev, "tuned": ds.queries, "holdout": ds.holdout} {
		out[name] = map[string][]string{}
		for _, q := range qs {
			var ids []string
			for _, h := range ix.Search(q.Query, 30).Hits {
				ids = append(ids, h.Doc.Server+"/"+h.Doc.Tool)
			}
			out[name][q.Query] = ids
		}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}
