package search

import (
	"errors"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/discoveryd/internal/embed"
)

// tinySemantic stands for a model that knows that an automobile (and a
// "zorp", a word no lexicon has) is a car, that a vehicle is close to
// both, and that fish are something else: three dimensions, car, fish
// and hire, and the vectors of tinyDocs in their order.
func tinySemantic(n int) *Semantic {
	unit := func(v ...float32) []float32 {
		out := append([]float32(nil), v...)
		embed.Unitize(out)
		return out
	}
	queries := map[string][]float32{
		"zorp":       unit(1, 0.05, 0.05),
		"automobile": unit(1, 0.1, 0),
	}
	vecs := [][]float32{unit(0.9, 0, 0.5), unit(0, 1, 0.1), unit(0.1, 0.9, 0.1)}
	sem := &Semantic{Dims: 3, Query: func(q string) ([]float32, error) {
		if v, ok := queries[q]; ok {
			return v, nil
		}
		return nil, errors.New("no vector for " + q)
	}}
	for _, v := range vecs[:n] {
		sem.Vectors = append(sem.Vectors, v...)
	}
	return sem
}

func tinyDocs() []Doc {
	return []Doc{
		{Server: "cars", ServerAlias: "cars", Tool: "rent_vehicle", ToolAlias: "rent_vehicle", Description: "Hire a car for a trip"},
		{Server: "sea", ServerAlias: "sea", Tool: "catch_fish", ToolAlias: "catch_fish", Description: "Catch a fish"},
		{Server: "sea", ServerAlias: "sea", Tool: "automobile", ToolAlias: "automobile", Description: "A boat"},
	}
}

// TestModelFindsAToolThatSharesNoWord: "zorp" is in no tool's text, so
// the words alone find nothing; the model finds the car rental, and says
// that it matched by meaning only.
func TestModelFindsAToolThatSharesNoWord(t *testing.T) {
	t.Parallel()
	docs := tinyDocs()[:2]
	if res := NewIndex(docs).Search("zorp", 5); len(res.Hits) != 0 {
		t.Fatalf("words alone found %v for a word no tool has", names(res.Hits))
	}
	res := NewIndexWith(docs, Options{Semantic: tinySemantic(len(docs))}).Search("zorp", 5)
	if len(res.Hits) == 0 || res.Hits[0].Doc.Tool != "rent_vehicle" {
		t.Fatalf("with the model: hits %v, want rent_vehicle first", names(res.Hits))
	}
	if why := res.Hits[0].Why; !strings.Contains(why, "meaning only") {
		t.Errorf("why = %q, want it to say the match is by meaning only", why)
	}
	for _, h := range res.Hits {
		if h.Doc.Tool == "catch_fish" {
			t.Errorf("fishing matched a car query: %v", names(res.Hits))
		}
	}
}

// TestModelKeepsExactNamesFirst: a tool named as the query ranks first
// however close another tool's meaning is.
func TestModelKeepsExactNamesFirst(t *testing.T) {
	t.Parallel()
	ix := NewIndexWith(tinyDocs(), Options{Semantic: tinySemantic(3)})
	res := ix.Search("automobile", 5)
	if len(res.Hits) == 0 || res.Hits[0].Doc.Tool != "automobile" || res.Hits[0].Why != "exact name" {
		t.Fatalf("hits %v (first why %q), want the tool named automobile first, as an exact name", names(res.Hits), res.Hits[0].Why)
	}
	if len(res.Hits) < 2 || res.Hits[1].Doc.Tool != "rent_vehicle" {
		t.Errorf("hits %v, want the car rental next, by meaning", names(res.Hits))
	}
}

// TestModelSearchHonoursKeep: a tool found by meaning alone is left out
// when the caller's filter excludes its server.
func TestModelSearchHonoursKeep(t *testing.T) {
	t.Parallel()
	ix := NewIndexWith(tinyDocs(), Options{Semantic: tinySemantic(3)})
	res := ix.SearchFunc("zorp", 5, func(d *Doc) bool { return d.Server == "sea" })
	for _, h := range res.Hits {
		if h.Doc.Server != "sea" {
			t.Errorf("hit %s/%s from a server the filter excludes", h.Doc.Server, h.Doc.Tool)
		}
	}
}

// TestModelKeepsMisspeltNames: a query that misspells a tool's whole name
// finds that tool first although the model's vector of the misspelling
// points at another tool (as the real model's may: it has never seen the
// misspelt word), and says that it matched as a misspelt name.
func TestModelKeepsMisspeltNames(t *testing.T) {
	t.Parallel()
	docs := tinyDocs()[:2]
	sem := tinySemantic(len(docs))
	sem.Query = func(string) ([]float32, error) { return []float32{0, 1, 0}, nil } // "fish"
	res := NewIndexWith(docs, Options{Semantic: sem}).Search("rent vehilce", 5)
	if len(res.Hits) == 0 || res.Hits[0].Doc.Tool != "rent_vehicle" {
		t.Fatalf("hits %v, want rent_vehicle first for its misspelt name", names(res.Hits))
	}
	if why := res.Hits[0].Why; why != "misspelt tool name" {
		t.Errorf("why = %q, want %q", why, "misspelt tool name")
	}
	// A query that is no tool's name, misspelt or not, is ranked as before.
	res = NewIndexWith(docs, Options{Semantic: sem}).Search("rent something", 5)
	if len(res.Hits) == 0 || res.Hits[0].Doc.Tool != "catch_fish" {
		t.Errorf("hits %v, want the model's choice first for a query that names no tool", names(res.Hits))
	}
}

// TestModelMisspeltNamesOfTheCorpus asks for every tool of the corpus by
// a misspelt name, with the installed model: as many must be found in the
// top five, and first, as by words alone, and every one in the top five.
func TestModelMisspeltNamesOfTheCorpus(t *testing.T) {
	ds := loadDataset(t)
	sem := modelSemantic(t, ds.docs)
	words, wordsFirst, _, _ := typoNameRate(NewIndex(ds.docs), ds.docs)
	model, modelFirst, n, fails := typoNameRate(NewIndexWith(ds.docs, Options{Semantic: sem}), ds.docs)
	t.Logf("misspelt names of %d tools, in the top %d / first: words %.4f / %.4f, with the model %.4f / %.4f", n, reportLimit, words, wordsFirst, model, modelFirst)
	if model < 1 || model < words || modelFirst < wordsFirst {
		t.Errorf("with the model %.4f in the top %d and %.4f first, words alone %.4f and %.4f; missed: %v", model, reportLimit, modelFirst, words, wordsFirst, fails)
	}
}
