package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tree writes files under a temporary root and returns it.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, text := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestReadCorpus(t *testing.T) {
	root := tree(t, map[string]string{
		"Translation-en": "Package: tool\nDescription-md5: 0\nDescription-en: fetch a Web page\n Fetches pages over HTTP.\n .\n Second paragraph.\n",
		"usr/share/doc/python3.11/html/_sources/library/os.rst.txt":                "Use :func:`os.fork` to fork.\n\nNext paragraph::\n\n   os.fork()\n\n     pid = 0\nLast.\n",
		"usr/share/doc/postgresql-doc-15/html/sql.html":                            "<p>Drop a table.</p><pre>DROP TABLE t;</pre><p>Done &amp; dusted</p>",
		"usr/share/gocode/src/github.com/slack-go/slack/chat.go":                   "// PostMessage sends a message to a channel.\n//go:generate x\nfunc f() {}\n",
		"usr/share/gocode/src/github.com/slack-go/slack/chat_test.go":              "// Ignored test comment.\n",
		"usr/lib/python3/dist-packages/botocore/data/s3/2006-03-01/service-2.json": `{"operations":{"DeleteBucket":{"documentation":"<p>Deletes the bucket.</p>"}}}`,
		"usr/lib/python3/dist-packages/botocore/data/s3/2005-01-01/service-2.json": `{"operations":{"Old":{"documentation":"<p>Superseded text.</p>"}}}`,
		"usr/share/gocode/src/google.golang.org/api/drive/v2/drive-gen.go":         "// Superseded text.\n",
		"usr/share/gocode/src/google.golang.org/api/drive/v3/drive-gen.go":         "// Lists the files.\n",
		"usr/share/gocode/src/google.golang.org/api/drive/v3beta/drive-gen.go":     "// Beta text.\n",
	})
	translationsPath = filepath.Join(root, "Translation-en")
	defer func() { translationsPath = "" }()
	c, err := readCorpus(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var para []string
	for _, id := range c.text {
		if id < 0 {
			got = append(got, strings.Join(para, " "))
			para = para[:0]
			continue
		}
		para = append(para, c.words[id])
	}
	want := []string{
		"fetch web page", "fetches pages over http", "second paragraph", // Translation-en
		"use os fork to fork", "next paragraph last", // reStructuredText, role and literal block dropped
		"drop table", "done dusted", // HTML, code block dropped
		"deletes the bucket",                   // botocore, the newest version only
		"postmessage sends message to channel", // Go comments, no directives or tests
		"lists the files",                      // Google APIs, the newest stable version only
	}
	if !slices.Equal(got, want) {
		t.Errorf("paragraphs\n got %q\nwant %q", got, want)
	}
}

func TestManText(t *testing.T) {
	var got []string
	err := manText("gh.1", []byte(".TH GH 1\n.SH NAME\ngh-repo-fork \\- Create a fork\n.\\\" comment\n.B --clone\nclone the \\fBfork\\fR\n"), func(p string) {
		got = append(got, strings.Join(appendTokens(nil, p), " "))
	})
	if err != nil {
		t.Fatal(err)
	}
	// A request's arguments are text; section requests start a paragraph.
	want := []string{"gh", "name gh repo fork create fork clone clone the fork"} //nolint:dupword // --clone, then its text
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// toyCorpus has two topics whose words never share a paragraph.
func toyCorpus(v *vocab) []int32 {
	var out []int32
	for i := range 400 {
		var words []string
		if i%2 == 0 {
			words = strings.Fields("git repository branch commit fork clone push")
		} else {
			words = strings.Fields("calendar event meeting attendee invite schedule reminder")
		}
		for j := range words {
			out = append(out, v.id[words[(i+j)%len(words)]])
		}
		out = append(out, -1)
	}
	return out
}

func TestTrainSGNSDeterministicAndTopical(t *testing.T) {
	counts := map[string]int64{}
	for _, w := range strings.Fields("git repository branch commit fork clone push calendar event meeting attendee invite schedule reminder") {
		counts[w] = 200
	}
	v := newVocab(counts, 1, 100)
	p := sgnsParams{dims: 16, window: 3, negative: 3, epochs: 3, alpha: 0.05, sample: 1}
	a, _ := trainSGNS(v, toyCorpus(v), p, nil)
	b, _ := trainSGNS(v, toyCorpus(v), p, nil)
	if !slices.Equal(a, b) {
		t.Fatal("two trainings on the same corpus differ")
	}
	normalize(a, p.dims)
	cos := func(x, y string) float32 {
		i, j := int(v.id[x])*p.dims, int(v.id[y])*p.dims
		var s float32
		for k := range p.dims {
			s += a[i+k] * a[j+k]
		}
		return s
	}
	if near, far := cos("fork", "repository"), cos("fork", "meeting"); near <= far {
		t.Errorf("cos(fork, repository) %.2f <= cos(fork, meeting) %.2f", near, far)
	}
}

func TestEncode(t *testing.T) {
	vs := []float32{0, 1, 0.5, -0.25, 0, 0}
	b := encode([]string{"zeta", "alpha", "mid"}, vs, 2)
	want := []byte("cxvec1\n")
	want = binary.AppendUvarint(want, 3)
	want = binary.AppendUvarint(want, 2)
	for _, w := range []string{"alpha", "mid", "zeta"} {
		want = binary.AppendUvarint(want, uint64(len(w)))
		want = append(want, w...)
	}
	m := int8(-64) // -0.25 of 0.5's 127
	want = append(want, 127, byte(m), 0, 0, 0, 127)
	if !bytes.Equal(b, want) {
		t.Errorf("encode = %v\n want %v", b, want)
	}
}
