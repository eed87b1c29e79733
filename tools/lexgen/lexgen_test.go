package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeWordNet writes a WordNet database of a few verbs in the format of
// Debian's wordnet-base: delete and erase share a synset whose antonym is
// insert, get_rid_of and remove share another, and ran is run's past.
func writeWordNet(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"data.verb": "  licence header line\n" +
			"00000001 30 v 02 delete 0 erase 0 001 ! 00000002 v 0101 | remove from a text\n" +
			"00000002 30 v 01 insert 0 000 | put in\n" +
			"00000003 30 v 02 get_rid_of 0 remove 0 000 | do away with\n" +
			"00000004 30 v 01 run 0 000 | move fast\n",
		"index.verb": "  licence header line\n" +
			"delete v 1 1 ! 1 0 00000001\n" +
			"erase v 1 0 1 0 00000001\n" +
			"insert v 1 0 1 0 00000002\n" +
			"get_rid_of v 1 0 1 0 00000003\n" +
			"remove v 1 0 1 0 00000003\n" +
			"run v 1 0 1 0 00000004\n",
		"verb.exc": "ran run\n",
	}
	for _, pos := range []string{"noun", "adj", "adv"} {
		files["data."+pos], files["index."+pos], files[pos+".exc"] = "", "", ""
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// writeVectors writes a wink-embeddings-style JSON file: each word's vector
// is its group's axis plus a little of its own, so words of one group are
// close (cosine about 0.9) and the groups are orthogonal.
func writeVectors(t *testing.T, groups map[string]int) string {
	t.Helper()
	var words []string
	for w := range groups {
		words = append(words, w)
	}
	slices.Sort(words)
	vecs := map[string][]float64{}
	for i, w := range words {
		v := make([]float64, dims+2)
		v[groups[w]] = 3
		v[50+i] = 1
		vecs[w] = v
	}
	// The package's file has its fields in this order, words before
	// vectors, which the loader relies on.
	wj, _ := json.Marshal(words)
	vj, _ := json.Marshal(vecs)
	b := fmt.Appendf(nil, `{"precision":8,"dimensions":%d,"words":%s,"vectors":%s,"unkVector":[]}`, dims, wj, vj)
	path := filepath.Join(t.TempDir(), "vectors.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBuild(t *testing.T) {
	wn, err := loadWordNet(writeWordNet(t))
	if err != nil {
		t.Fatal(err)
	}
	// delete, erase, insert, remove and rid are used alike (GloVe puts
	// antonyms close too); run and ran alike; get and of apart.
	vs, err := loadVectors(writeVectors(t, map[string]int{
		"delete": 0, "erase": 0, "insert": 0, "remove": 0, "rid": 0, "run": 1, "ran": 1, "get": 2, "of": 4,
	}))
	if err != nil {
		t.Fatal(err)
	}
	p := defaultParams()
	p.frequent = 0
	lx := build(wn, vs, p, "")
	related := func(key string) string {
		i, ok := slices.BinarySearch(lx.keys, key)
		if !ok {
			return ""
		}
		var out []string
		for j, r := range lx.rels[i] {
			out = append(out, fmt.Sprintf("%s/%s", lx.keys[r.to], lx.kinds[i][j]))
		}
		return strings.Join(out, " ")
	}
	tests := []struct {
		key, want string
		has       bool
	}{
		{"delet", "eras/synonym", true},
		{"delet", "insert/", false}, // the antonym, though its vector is near
		{"delet", "remov/near", true},
		{"get rid of", "remov/synonym", true},
		{"ran", "run/form", true},
	}
	for _, tt := range tests {
		if got := related(tt.key); strings.Contains(got, tt.want) != tt.has {
			t.Errorf("%q relates to %q; want %q there: %v", tt.key, got, tt.want, tt.has)
		}
	}
	// The encoding starts with the magic and holds every entry.
	b := lx.encode()
	if !strings.HasPrefix(string(b), "cxlex1\n") || !strings.Contains(string(b), "get rid of") {
		t.Errorf("encode() = %q", b)
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := loadWordNet(t.TempDir()); err == nil {
		t.Error("loadWordNet of an empty directory succeeded")
	}
	bad := filepath.Join(t.TempDir(), "v.json")
	if err := os.WriteFile(bad, []byte(`{"dimensions": 50, "words": [], "vectors":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadVectors(bad); err == nil || !strings.Contains(err.Error(), "dimensions") {
		t.Errorf("loadVectors of 50-d vectors: %v", err)
	}
}
