package search

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestSemanticGrid prints recall of the index fused with the model at the
// settings SEMGRID lists ("w=0.5,floor=0.2,near=20,pool=50;w=0.6", each
// from the shipped values), on the tuned set, the hold-out and the dev
// set, and with BLIND=1 the blind set's aggregate too (for reporting a
// choice already made, never to make one). MODELTEXT names what the model
// reads of a tool (modelTextVariants; ModelText by default). It runs the
// model at $CODEEXEC_SEARCH_MODEL or the default path.
//
//	SEMGRID='w=0.5' MODELTEXT=params go test -run TestSemanticGrid -v ./discoveryd/internal/search/
func TestSemanticGrid(t *testing.T) {
	grid := os.Getenv("SEMGRID")
	if grid == "" {
		t.Skip("set SEMGRID")
	}
	ds := loadDataset(t)
	if v := os.Getenv("MODELTEXT"); v != "" {
		fn, ok := modelTextVariants[v]
		if !ok {
			t.Fatalf("MODELTEXT=%q: want one of %v", v, slices.Sorted(maps.Keys(modelTextVariants)))
		}
		modelText = fn
		defer func() { modelText = ModelText }()
	}
	sem := modelSemantic(t, ds.docs)
	sets := []struct {
		name string
		qs   []labelledQuery
	}{{"tuned", ds.queries}, {"holdout", ds.holdout}, {"dev", ds.dev}, {"tuned-para", kindOf(ds.queries, "paraphrase")}, {"tuned-typo", kindOf(ds.queries, "typo")}}
	if os.Getenv("BLIND") == "1" {
		sets = append(sets, struct {
			name string
			qs   []labelledQuery
		}{"blind", ds.blind}, struct {
			name string
			qs   []labelledQuery
		}{"blind-para", kindOf(ds.blind, "paraphrase")})
		for _, k := range []string{"multi", "keyword", "exact", "typo"} {
			sets = append(sets, struct {
				name string
				qs   []labelledQuery
			}{"blind-" + k, kindOf(ds.blind, k)})
		}
	}
	saved := [...]any{semWeight, semFloor, semNearest, semPool}
	defer func() {
		semWeight, semFloor, semNearest, semPool = saved[0].(float32), saved[1].(float32), saved[2].(int), saved[3].(int)
	}()
	for _, setting := range strings.Split(grid, ";") {
		// Each setting starts from the shipped values.
		semWeight, semFloor, semNearest, semPool = saved[0].(float32), saved[1].(float32), saved[2].(int), saved[3].(int)
		for _, kv := range strings.Split(setting, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "w":
				semWeight = float32(f)
			case "floor":
				semFloor = float32(f)
			case "near":
				semNearest = int(f)
			case "pool":
				semPool = int(f)
			}
		}
		var ix *Index
		if semWeight == 0 {
			ix = NewIndex(ds.docs)
		} else {
			ix = NewIndexWith(ds.docs, Options{Semantic: sem})
		}
		line := fmt.Sprintf("%-40s", setting)
		for _, s := range sets {
			r := measureRecall(ix.Search, s.qs)
			line += fmt.Sprintf(" %s %.3f/%.3f", s.name, r.r1, r.r5)
		}
		bare, qual, _ := exactNameRate(ix, ds.docs)
		typo, typoFirst, _, _ := typoNameRate(ix, ds.docs)
		line += fmt.Sprintf(" exact %.3f/%.3f misspelt %.3f/%.3f", bare, qual, typoFirst, typo)
		t.Log(line)
	}
}

// modelTextVariants are what the model may read of a tool, for
// TestSemanticGrid's MODELTEXT: the shipped ModelText ("name"), and with
// the parameters' names or descriptions after the description.
var modelTextVariants = map[string]func(*Doc) string{
	"name": ModelText,
	"params": func(d *Doc) string {
		return ModelText(d) + paramNames(d)
	},
	"params-first": func(d *Doc) string {
		e := *d
		e.Description = ""
		return strings.TrimSuffix(ModelText(&e), " ") + paramNames(d) + " " + cut(d.Description, modelDescChars)
	},
	"desc300": func(d *Doc) string {
		e := *d
		e.Description = cut(d.Description, 300)
		return ModelText(&e)
	},
	"params-if-short": func(d *Doc) string {
		if len(d.Description) >= 100 {
			return ModelText(d)
		}
		return ModelText(d) + paramNames(d)
	},
	"paramtext-if-short": func(d *Doc) string {
		if len(d.Description) >= 100 {
			return ModelText(d)
		}
		return ModelText(d) + " " + cut(d.ParamText, 200)
	},
	"paramtext": func(d *Doc) string {
		return ModelText(d) + " " + cut(d.ParamText, 300)
	},
	"params-paramtext": func(d *Doc) string {
		return ModelText(d) + paramNames(d) + " " + cut(d.ParamText, 300)
	},
}

// paramNames is " Parameters: a, b c." for a tool with parameters a and
// bC, else "".
func paramNames(d *Doc) string {
	if len(d.Params) == 0 {
		return ""
	}
	ps := make([]string, len(d.Params))
	for i, p := range d.Params {
		ps[i] = splitName(p)
	}
	return " Parameters: " + strings.Join(ps, ", ") + "."
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func kindOf(qs []labelledQuery, kind string) []labelledQuery {
	var out []labelledQuery
	for _, q := range qs {
		if q.Kind == kind {
			out = append(out, q)
		}
	}
	return out
}

// TestDumpEngine writes, for scripts/search-model-compare.sh, the corpus's
// tools and the engine's 50 best hits (by words, no model) for every
// query of every set, to the file SEARCH_DUMP names. The script keeps the
// blind set's rows out of every choice and prints them only with BLIND=1.
func TestDumpEngine(t *testing.T) {
	path := os.Getenv("SEARCH_DUMP")
	if path == "" {
		t.Skip("set SEARCH_DUMP")
	}
	ds := loadDataset(t)
	ix := NewIndex(ds.docs)
	type hit struct {
		ID    string  `json:"id"`
		Score float64 `json:"score"`
		Why   string  `json:"why"`
	}
	type query struct {
		Set      string   `json:"set"`
		Kind     string   `json:"kind"`
		Query    string   `json:"query"`
		Relevant []string `json:"relevant"`
		Hits     []hit    `json:"hits"`
	}
	type doc struct {
		Server      string `json:"Server"`
		Tool        string `json:"Tool"`
		Description string `json:"Description"`
	}
	var out struct {
		Docs    []doc   `json:"docs"`
		Queries []query `json:"queries"`
	}
	for _, d := range ds.docs {
		out.Docs = append(out.Docs, doc{d.Server, d.Tool, d.Description})
	}
	for _, set := range []struct {
		name string
		qs   []labelledQuery
	}{{"tuned", ds.queries}, {"holdout", ds.holdout}, {"dev", ds.dev}, {"blind", ds.blind}} {
		for _, q := range set.qs {
			var hs []hit
			for _, h := range ix.Search(q.Query, 50).Hits {
				hs = append(hs, hit{h.Doc.Server + "/" + h.Doc.Tool, h.Score, h.Why})
			}
			out.Queries = append(out.Queries, query{set.name, q.Kind, q.Query, q.Relevant, hs})
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
