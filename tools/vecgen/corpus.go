package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// A source is one body of text in the training corpus: a Debian package
// and how its files are read.
type source struct {
	name    string // Debian package
	licence string // of the text, from the package's copyright file
	// files returns the paths to read under root, in a fixed order.
	files func(root string) ([]string, error)
	// text turns one file into paragraphs of plain text.
	text func(path string, b []byte, emit func(string)) error
}

// sources are the training text, in the order they are read. Every one is
// under a licence that allows redistribution with modification; what is
// shipped is word vectors, not text.
var sources = []source{
	{"apt Translation-en (bookworm main)", "each description its package's", func(string) ([]string, error) { return []string{translationsPath}, nil }, debianDescriptions},
	{"python3.11-doc", "PSF-2.0", globFiles("/usr/share/doc/python3.11/html/_sources/**/*.txt"), restText},
	{"postgresql-doc-15", "PostgreSQL", globFiles("/usr/share/doc/postgresql-doc-15/html/*.html"), htmlText},
	{"nodejs-doc", "Expat", globFiles("/usr/share/doc/nodejs/api/*.md.gz"), markdownText},
	{"docker-doc", "Apache-2.0", globFiles("/usr/share/doc/docker-doc/**/*.md", "/usr/share/doc/docker-doc/**/*.md.gz"), markdownText},
	{"gh", "Expat", globFiles("/usr/share/man/man1/gh*.1.gz"), manText},
	{"python3-botocore", "Apache-2.0", botocoreFiles, botocoreText},
	{"golang-github-google-go-github-dev", "BSD-3-Clause", globFiles("/usr/share/gocode/src/github.com/google/go-github/**/*.go"), goComments},
	{"golang-github-xanzy-go-gitlab-dev", "Apache-2.0", globFiles("/usr/share/gocode/src/github.com/xanzy/go-gitlab/*.go"), goComments},
	{"golang-github-digitalocean-godo-dev", "Expat", globFiles("/usr/share/gocode/src/github.com/digitalocean/godo/**/*.go"), goComments},
	{"golang-github-slack-go-slack-dev", "BSD-2-Clause", globFiles("/usr/share/gocode/src/github.com/slack-go/slack/*.go"), goComments},
	{"golang-google-api-dev", "BSD-3-Clause", googleAPIFiles, goComments},
	{"awscli", "Apache-2.0", globFiles("/usr/lib/python3/dist-packages/awscli/examples/**/*.rst"), restText},
}

// globFiles matches patterns in which "**/" stands for any number of
// directories, and returns the sorted union. root prefixes every pattern
// (a test's temporary tree; "" on a real system).
func globFiles(patterns ...string) func(root string) ([]string, error) {
	return func(root string) ([]string, error) {
		var out []string
		for _, p := range patterns {
			p = root + p
			dir, rest, deep := strings.Cut(p, "**/")
			if !deep {
				m, err := filepath.Glob(p)
				if err != nil {
					return nil, err
				}
				out = append(out, m...)
				continue
			}
			err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if ok, _ := filepath.Match(rest, d.Name()); ok && !d.IsDir() {
					out = append(out, path)
				}
				return nil
			})
			if err != nil && !os.IsNotExist(err) {
				return nil, err
			}
		}
		out = slices.Compact(slices.Sorted(slices.Values(out)))
		return slices.DeleteFunc(out, func(p string) bool { return strings.HasSuffix(p, "_test.go") }), nil
	}
}

// readFile reads path, gunzipping a .gz file.
func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil || !strings.HasSuffix(path, ".gz") {
		return b, err
	}
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return io.ReadAll(r)
}

// debianDescriptions reads an apt Translation-en index: each package's
// Description-en, its short line and its long description, one paragraph
// each (" ." separates the long description's paragraphs).
func debianDescriptions(_ string, b []byte, emit func(string)) error {
	var para strings.Builder
	flush := func() {
		if para.Len() > 0 {
			emit(para.String())
			para.Reset()
		}
	}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Description-en: "):
			flush()
			emit(strings.TrimPrefix(line, "Description-en: "))
			in = true
		case in && strings.HasPrefix(line, " "):
			if strings.TrimSpace(line) == "." {
				flush()
			} else {
				para.WriteString(line)
			}
		default:
			flush()
			in = false
		}
	}
	flush()
	return sc.Err()
}

var (
	tagRE    = regexp.MustCompile(`(?s)<[^>]*>`)
	preRE    = regexp.MustCompile(`(?is)<(pre|script|style)\b.*?</(pre|script|style)>`)
	fenceRE  = regexp.MustCompile("(?s)```.*?```")
	roleRE   = regexp.MustCompile(`:[a-z]+(:[a-z]+)?:`)
	blockRE  = regexp.MustCompile(`\n\s*\n`)
	troffRE  = regexp.MustCompile(`\\f[BIRP]|\\f\(..|\\\(..|\\\*.|\\[-&e|^ ]|\\s[-+]?\d`)
	urlRE    = regexp.MustCompile(`https?://\S+`)
	restCode = regexp.MustCompile(`(?m)^(\.\. [a-z-]+::.*)$`)
)

// htmlText strips an HTML page to its prose: no preformatted code, no
// scripts, no tags; entities decoded; paragraphs at blank lines and
// block-level tags.
func htmlText(_ string, b []byte, emit func(string)) error {
	s := preRE.ReplaceAllString(string(b), "\n\n")
	s = regexp.MustCompile(`(?i)</?(p|div|h[1-6]|li|dt|dd|tr|td|th|table|br)\b[^>]*>`).ReplaceAllString(s, "\n\n")
	s = html.UnescapeString(tagRE.ReplaceAllString(s, " "))
	paragraphs(s, emit)
	return nil
}

// markdownText drops fenced code and link targets from Markdown.
func markdownText(_ string, b []byte, emit func(string)) error {
	s := fenceRE.ReplaceAllString(string(b), "\n\n")
	s = urlRE.ReplaceAllString(s, " ")
	s = html.UnescapeString(tagRE.ReplaceAllString(s, " "))
	paragraphs(s, emit)
	return nil
}

// restText drops reStructuredText roles (":func:"), directives and
// literal blocks (the indented lines after a paragraph ending "::").
func restText(_ string, b []byte, emit func(string)) error {
	var kept strings.Builder
	literal := false
	for _, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case literal && (t == "" || line[0] == ' ' || line[0] == '\t'):
			continue
		case strings.HasSuffix(t, "::"):
			literal = true
			line = strings.TrimSuffix(t, "::")
		default:
			literal = false
		}
		kept.WriteString(line)
		kept.WriteByte('\n')
	}
	s := roleRE.ReplaceAllString(kept.String(), " ")
	s = restCode.ReplaceAllString(s, "")
	paragraphs(urlRE.ReplaceAllString(s, " "), emit)
	return nil
}

// manText reads a troff man page: request lines lose their request
// (".B word" is "word"), comments and escapes are dropped.
func manText(_ string, b []byte, emit func(string)) error {
	var out strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, `.\"`) || strings.HasPrefix(line, `'\"`) {
			continue
		}
		if strings.HasPrefix(line, ".") {
			req, args, _ := strings.Cut(line, " ")
			switch req {
			case ".SH", ".SS", ".PP", ".P", ".LP", ".TP", ".IP", ".sp", ".br":
				out.WriteString("\n\n")
			}
			line = args
		}
		out.WriteString(troffRE.ReplaceAllString(line, " "))
		out.WriteByte('\n')
	}
	paragraphs(out.String(), emit)
	return nil
}

// goComments reads the comment lines of a Go file, a paragraph per
// comment block, leaving out build constraints and directives.
func goComments(_ string, b []byte, emit func(string)) error {
	var para strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(line)
		c, ok := strings.CutPrefix(t, "//")
		if !ok || strings.HasPrefix(c, "go:") || strings.HasPrefix(c, " +build") || strings.HasPrefix(c, "nolint") {
			if para.Len() > 0 {
				emit(para.String())
				para.Reset()
			}
			continue
		}
		para.WriteString(urlRE.ReplaceAllString(c, " "))
		para.WriteByte(' ')
	}
	if para.Len() > 0 {
		emit(para.String())
	}
	return nil
}

// botocoreFiles picks, for each AWS service in botocore's data, the
// service-2.json of its newest API version (older versions repeat it).
func botocoreFiles(root string) ([]string, error) {
	return newestPerDir(root+"/usr/lib/python3/dist-packages/botocore/data", "*/service-2.json*", nil)
}

// botocoreText emits every "documentation" string of a botocore service
// description (its operations, shapes and members), HTML stripped, each
// distinct string once.
func botocoreText(path string, b []byte, emit func(string)) error {
	return jsonStrings(path, b, "documentation", func(s string) { _ = htmlText(path, []byte(s), emit) })
}

// paragraphs emits s's blank-line separated paragraphs.
func paragraphs(s string, emit func(string)) {
	for _, p := range blockRE.Split(s, -1) {
		if strings.TrimSpace(p) != "" {
			emit(p)
		}
	}
}

// appendTokens appends the words of text: lowercase runs of letters and
// digits that hold a letter, at most 30 bytes long.
func appendTokens(dst []string, text string) []string {
	start := -1
	letter := false
	end := func(i int) {
		if start >= 0 && letter && i-start <= 30 && i-start >= 2 {
			dst = append(dst, strings.ToLower(text[start:i]))
		}
		start, letter = -1, false
	}
	for i, r := range text {
		switch {
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if start < 0 {
				start = i
			}
			letter = letter || unicode.IsLetter(r)
		default:
			end(i)
		}
	}
	end(len(text))
	return dst
}

// googleAPIFiles picks, for each Google API in google-api-go-client, the
// generated client of its newest stable version (sorted by name: "v3"
// after "v2"; alpha and beta versions left out), whose comments are the
// API's reference documentation.
func googleAPIFiles(root string) ([]string, error) {
	return newestPerDir(root+"/usr/share/gocode/src/google.golang.org/api", "v*/*-gen.go", func(p string) bool {
		return strings.Contains(filepath.Base(filepath.Dir(p)), "beta") || strings.Contains(filepath.Base(filepath.Dir(p)), "alpha")
	})
}

// newestPerDir returns, for each directory right under dir, the last in
// sorted order of the files inside it that match pattern (a filepath.Glob
// pattern relative to that directory) and that skip, unless nil, does not
// reject: the newest version, where versions sort by name. A missing dir
// holds nothing.
func newestPerDir(dir, pattern string, skip func(path string) bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		versions, _ := filepath.Glob(filepath.Join(dir, e.Name(), pattern))
		if skip != nil {
			versions = slices.DeleteFunc(versions, skip)
		}
		if len(versions) > 0 {
			slices.Sort(versions)
			out = append(out, versions[len(versions)-1])
		}
	}
	return out, nil
}

// jsonStrings calls fn with every distinct string value of key in the
// JSON document b, in document order of sorted keys.
func jsonStrings(path string, b []byte, key string, fn func(string)) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if s, ok := x[k].(string); ok && k == key {
					if !seen[s] {
						seen[s] = true
						fn(s)
					}
					continue
				}
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return nil
}
