package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// wordNet is the part of WordNet 3.0 the lexicon uses: each lemma's senses
// in frequency order, and each synset's lemmas and pointers.
type wordNet struct {
	// senses maps a lowercase lemma ("delete", "get_rid_of") to its
	// synsets, most frequent sense first, over all parts of speech.
	senses map[string][]senseRef
	// synsets maps pos+offset to the synset.
	synsets map[string]*synset
	// base maps an irregular inflection ("ran", "children") to its lemmas.
	base map[string][]string
}

// senseRef is one sense of a lemma: a synset and the lemma's rank among the
// senses of that part of speech (0 is the most frequent).
type senseRef struct {
	key  string
	rank int
}

type synset struct {
	lemmas []string
	ptrs   []pointer
}

// pointer is a WordNet relation from a synset (src 0) or from one of its
// lemmas (src, 1-based) to another synset or one of its lemmas (dst).
type pointer struct {
	sym      string
	target   string
	src, dst int
}

var posFiles = []struct{ name, pos string }{{"noun", "n"}, {"verb", "v"}, {"adj", "a"}, {"adv", "r"}}

func loadWordNet(dir string) (*wordNet, error) {
	wn := &wordNet{senses: map[string][]senseRef{}, synsets: map[string]*synset{}, base: map[string][]string{}}
	for _, pf := range posFiles {
		if err := eachLine(filepath.Join(dir, "data."+pf.name), func(line string) error {
			if strings.HasPrefix(line, "  ") {
				return nil // licence header
			}
			return wn.parseData(pf.pos, line)
		}); err != nil {
			return nil, err
		}
		if err := eachLine(filepath.Join(dir, "index."+pf.name), func(line string) error {
			if strings.HasPrefix(line, "  ") {
				return nil
			}
			return wn.parseIndex(pf.pos, line)
		}); err != nil {
			return nil, err
		}
		if err := eachLine(filepath.Join(dir, pf.name+".exc"), func(line string) error {
			f := strings.Fields(line)
			if len(f) >= 2 {
				wn.base[f[0]] = append(wn.base[f[0]], f[1:]...)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if len(wn.senses) == 0 || len(wn.synsets) == 0 {
		return nil, fmt.Errorf("no WordNet data under %s (install Debian's wordnet-base)", dir)
	}
	return wn, nil
}

// parseData reads one synset line of data.<pos> (wndb(5WN)):
//
//	offset lex_filenum ss_type w_cnt word lex_id ... p_cnt ptr... | gloss
func (wn *wordNet) parseData(pos, line string) error {
	if i := strings.Index(line, " | "); i >= 0 {
		line = line[:i]
	}
	f := strings.Fields(line)
	if len(f) < 4 {
		return fmt.Errorf("short synset line %q", line)
	}
	n, err := strconv.ParseInt(f[3], 16, 32)
	if err != nil {
		return fmt.Errorf("word count in %q: %w", line, err)
	}
	s := &synset{}
	i := 4
	for range n {
		w := strings.ToLower(f[i])
		if p := strings.IndexByte(w, '('); p > 0 { // adjective marker: "(a)", "(p)", "(ip)"
			w = w[:p]
		}
		s.lemmas = append(s.lemmas, w)
		i += 2
	}
	pc, err := strconv.Atoi(f[i])
	if err != nil {
		return fmt.Errorf("pointer count in %q: %w", line, err)
	}
	i++
	for range pc {
		sd, err := strconv.ParseUint(f[i+3], 16, 16)
		if err != nil {
			return fmt.Errorf("pointer source/target in %q: %w", line, err)
		}
		tpos := f[i+2]
		if tpos == "s" {
			tpos = "a" // satellite adjectives live in data.adj
		}
		s.ptrs = append(s.ptrs, pointer{sym: f[i], target: tpos + f[i+1], src: int(sd >> 8), dst: int(sd & 0xff)})
		i += 4
	}
	wn.synsets[pos+f[0]] = s
	return nil
}

// parseIndex reads one lemma line of index.<pos>:
// lemma pos synset_cnt p_cnt ptr... sense_cnt tagsense_cnt offset...
func (wn *wordNet) parseIndex(pos, line string) error {
	f := strings.Fields(line)
	if len(f) < 4 {
		return fmt.Errorf("short index line %q", line)
	}
	cnt, err := strconv.Atoi(f[2])
	if err != nil {
		return fmt.Errorf("synset count in %q: %w", line, err)
	}
	offsets := f[len(f)-cnt:]
	for rank, off := range offsets {
		wn.senses[f[0]] = append(wn.senses[f[0]], senseRef{key: pos + off, rank: rank})
	}
	return nil
}

func eachLine(path string, fn func(string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close() // read only: a failed close loses nothing
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if err := fn(sc.Text()); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return sc.Err()
}
