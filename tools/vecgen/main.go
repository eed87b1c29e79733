// Command vecgen trains word vectors on software-domain English that ships
// in Debian (package descriptions, reference manuals, API documentation;
// the list is sources in corpus.go) and writes what the search package
// embeds. Run it through scripts/vectors.sh, which installs the packages:
//
//	go run ./tools/vecgen -translations FILE -out FILE
//
// Training is skip-gram with negative sampling on one goroutine with a
// fixed seed: the output is the same for the same inputs and flags.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/codeexec/codeexec/internal/porter"
)

// stemWords makes the corpus Porter stems, the search index's terms.
var stemWords bool

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "vecgen:", err)
		os.Exit(1)
	}
}

// translationsPath is the uncompressed apt Translation-en index.
var translationsPath string

func run(args []string) error {
	fs := flag.NewFlagSet("vecgen", flag.ContinueOnError)
	fs.StringVar(&translationsPath, "translations", "", "uncompressed apt Translation-en index of bookworm main")
	root := fs.String("root", "", "prefix of every source path (for tests)")
	fs.BoolVar(&stemWords, "stem", false, "train on Porter stems rather than words")
	raw := fs.String("raw", "", "write all trained vectors here (float32), for experiments")
	fromRaw := fs.String("from-raw", "", "skip reading and training: take the vectors -raw wrote")
	out := fs.String("out", "", "vectors file to write for the search package")
	pcs := fs.Int("pcs", 1, "principal directions removed from the vectors written")
	probe := fs.String("probe", "", "comma-separated words whose nearest words to print")
	p := sgnsParams{dims: 100, window: 5, negative: 5, epochs: 5, alpha: 0.025, sample: 1e-4}
	fs.IntVar(&p.dims, "dims", p.dims, "vector dimensions")
	fs.IntVar(&p.window, "window", p.window, "context window (words each side)")
	fs.IntVar(&p.epochs, "epochs", p.epochs, "passes over the corpus")
	fs.IntVar(&p.negative, "negative", p.negative, "negative samples per context word")
	minCount := fs.Int64("min-count", 5, "words seen fewer times are left out")
	maxVocab := fs.Int("max-vocab", 200000, "the most words trained")
	if err := fs.Parse(args); err != nil {
		return err
	}
	start := time.Now()
	if *fromRaw != "" {
		words, vs, d, err := readRaw(*fromRaw)
		if err != nil {
			return err
		}
		return write(*out, words, vs, d, *pcs)
	}
	c, err := readCorpus(*root)
	if err != nil {
		return err
	}
	v := newVocab(c.counts, *minCount, *maxVocab)
	ids := c.encode(v)
	fmt.Fprintf(os.Stderr, "vecgen: %d tokens, %d kept in a vocabulary of %d words (%v)\n", c.tokens, len(ids), len(v.words), time.Since(start).Round(time.Second))
	last := time.Now()
	vs, outv := trainSGNS(v, ids, p, func(f float64) {
		if time.Since(last) > 30*time.Second {
			fmt.Fprintf(os.Stderr, "vecgen: trained %.0f%% (%v)\n", 100*f, time.Since(start).Round(time.Second))
			last = time.Now()
		}
	})
	normalize(vs, p.dims)
	normalize(outv, p.dims)
	fmt.Fprintf(os.Stderr, "vecgen: trained (%v)\n", time.Since(start).Round(time.Second))
	if *probe != "" {
		for _, w := range strings.Split(*probe, ",") {
			fmt.Fprintf(os.Stderr, "%s: %s\n", w, strings.Join(nearest(v, vs, p.dims, w, 12), " "))
		}
	}
	if *raw != "" {
		if err := writeRaw(*raw, v, vs, p.dims); err != nil {
			return err
		}
		if err := writeRaw(*raw+".out", v, outv, p.dims); err != nil {
			return err
		}
	}
	return write(*out, v.words, vs, p.dims, *pcs)
}

// write post-processes and encodes the vectors to path, if not empty.
func write(path string, words []string, vs []float32, d, pcs int) error {
	if path == "" {
		return nil
	}
	postprocess(vs, d, pcs)
	b := encode(words, vs, d)
	fmt.Fprintf(os.Stderr, "vecgen: %d words x %d dimensions, %d bytes\n", len(words), d, len(b))
	return os.WriteFile(path, b, 0o644)
}

// readRaw reads what writeRaw wrote.
func readRaw(path string) (words []string, vs []float32, d int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, 0, err
	}
	const magic = "cxvec0\n"
	if len(b) < len(magic) || string(b[:len(magic)]) != magic {
		return nil, nil, 0, fmt.Errorf("%s: not a raw vectors file", path)
	}
	b = b[len(magic):]
	next := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			err = fmt.Errorf("%s: truncated", path)
			return 0
		}
		b = b[n:]
		return v
	}
	n, dd := int(next()), int(next())
	for range n {
		l := int(next())
		if err != nil || l > len(b) {
			return nil, nil, 0, fmt.Errorf("%s: truncated", path)
		}
		words = append(words, string(b[:l]))
		b = b[l:]
		next() // count
		if len(b) < 4*dd {
			return nil, nil, 0, fmt.Errorf("%s: truncated", path)
		}
		for x := range dd {
			vs = append(vs, math.Float32frombits(binary.LittleEndian.Uint32(b[4*x:])))
		}
		b = b[4*dd:]
	}
	return words, vs, dd, err
}

// corpus is the tokenised training text.
type corpus struct {
	counts map[string]int64
	ids    map[string]int32 // interned words
	words  []string
	text   []int32 // word numbers of ids, -1 between paragraphs
	tokens int64
}

func readCorpus(root string) (*corpus, error) {
	c := &corpus{counts: map[string]int64{}, ids: map[string]int32{}}
	var toks []string
	for _, s := range sources {
		files, err := s.files(root)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		before := c.tokens
		for _, f := range files {
			b, err := readFile(f)
			if err != nil {
				return nil, err
			}
			err = s.text(f, b, func(p string) {
				toks = appendTokens(toks[:0], p)
				if stemWords {
					for i, t := range toks {
						toks[i] = porter.Stem(t)
					}
				}
				for _, t := range toks {
					id, ok := c.ids[t]
					if !ok {
						id = int32(len(c.words))
						c.ids[t] = id
						c.words = append(c.words, t)
					}
					c.counts[t]++
					c.text = append(c.text, id)
				}
				c.tokens += int64(len(toks))
				c.text = append(c.text, -1)
			})
			if err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(os.Stderr, "vecgen: %-40s %6d files %10d tokens\n", s.name, len(files), c.tokens-before)
	}
	return c, nil
}

// encode maps the corpus to v's word ids, dropping words v lacks.
func (c *corpus) encode(v *vocab) []int32 {
	m := make([]int32, len(c.words))
	for i, w := range c.words {
		m[i] = -2
		if id, ok := v.id[w]; ok {
			m[i] = id
		}
	}
	out := make([]int32, 0, len(c.text))
	for _, t := range c.text {
		switch {
		case t < 0:
			if len(out) > 0 && out[len(out)-1] >= 0 {
				out = append(out, -1)
			}
		case m[t] >= 0:
			out = append(out, m[t])
		}
	}
	return out
}

// nearest returns the k words closest to w by cosine.
func nearest(v *vocab, vs []float32, d int, w string, k int) []string {
	id, ok := v.id[w]
	if !ok {
		return []string{"(unknown)"}
	}
	type sc struct {
		i int
		s float32
	}
	var best []sc
	q := vs[int(id)*d : int(id)*d+d]
	for i := range v.words {
		if i == int(id) {
			continue
		}
		var s float32
		for x, y := range vs[i*d : i*d+d] {
			s += q[x] * y
		}
		if len(best) < k || s > best[len(best)-1].s {
			best = append(best, sc{i, s})
			slices.SortFunc(best, func(a, b sc) int { return int(math.Copysign(1, float64(b.s-a.s))) })
			if len(best) > k {
				best = best[:k]
			}
		}
	}
	out := make([]string, len(best))
	for i, b := range best {
		out[i] = fmt.Sprintf("%s/%.2f", v.words[b.i], b.s)
	}
	return out
}

// writeRaw writes "cxvec0\n", the word count, dims, then each word
// (uvarint length, bytes, uvarint count) and its float32 components.
func writeRaw(path string, v *vocab, vs []float32, d int) error {
	b := []byte("cxvec0\n")
	b = binary.AppendUvarint(b, uint64(len(v.words)))
	b = binary.AppendUvarint(b, uint64(d))
	for i, w := range v.words {
		b = binary.AppendUvarint(b, uint64(len(w)))
		b = append(b, w...)
		b = binary.AppendUvarint(b, uint64(v.count[i]))
		for _, x := range vs[i*d : i*d+d] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	}
	return os.WriteFile(path, b, 0o644)
}
