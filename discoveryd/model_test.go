package discoveryd_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeexec/codeexec/discoveryd"
	"github.com/codeexec/codeexec/discoveryd/internal/embed"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	"github.com/codeexec/codeexec/services/grpctest"
)

// installedModel is the directory of the model scripts/search-model.sh
// installed; the test skips when there is none or it cannot run here.
func installedModel(t *testing.T) string {
	t.Helper()
	p := embed.DefaultPath()
	e, err := embed.Open(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, embed.ErrNoRuntime) {
		t.Skipf("no search model at %s: %v (run scripts/search-model.sh)", p, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = e.Close()
	return p
}

// pendingNote is what every hit says while the model has not read every
// tool.
const pendingNote = "by words only: the search model is still reading"

// search runs a query and returns its docs, failing on an error.
func search(t *testing.T, e *env, q string) []*discoveryv1.ToolDoc {
	t.Helper()
	resp, err := e.client.SearchTools(t.Context(), &discoveryv1.SearchToolsRequest{Query: q})
	if err != nil {
		t.Fatalf("SearchTools(%q): %v", q, err)
	}
	return resp.GetDocs()
}

func anyPending(docs []*discoveryv1.ToolDoc) bool {
	for _, d := range docs {
		if strings.Contains(d.GetMatchReason(), pendingNote) {
			return true
		}
	}
	return false
}

// TestModelReadsToolsOnceAcrossRestarts: with the model installed, the
// first search ranks by words and says so while the model reads the
// tools in the background; then searches rank by meaning. A second
// discoveryd on the same catalogue ranks by meaning from its first
// search: it takes the vectors the first stored and runs the model on
// no tool.
func TestModelReadsToolsOnceAcrossRestarts(t *testing.T) {
	t.Parallel()
	model := installedModel(t)
	cat := catalogue(t, t.TempDir())
	withModel := func(c *discoveryd.Config) { c.Catalog, c.SearchIndexWait, c.SearchModel = cat, time.Minute, model }

	first := start(t, twoServers(t), withModel)
	docs := search(t, first, "echo")
	if len(docs) == 0 || docs[0].GetTool() != "echo" || !strings.HasPrefix(docs[0].GetMatchReason(), "exact name; "+pendingNote) {
		t.Fatalf("first search: %v; want echo first, by exact name, saying the model is still reading", docs)
	}
	deadline := time.Now().Add(time.Minute)
	for anyPending(docs) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		docs = search(t, first, "echo")
	}
	if anyPending(docs) || docs[0].GetTool() != "echo" || docs[0].GetMatchReason() != "exact name" {
		t.Fatalf("a minute on: %v; want echo first by exact name, ranked with the model", docs)
	}
	first.close(t) // waits for the catalogue's writes

	second := start(t, twoServers(t), withModel)
	docs = search(t, second, "store facts about people and how they relate")
	if anyPending(docs) {
		t.Errorf("second process's first search ranks by words only; the vectors were not taken from the catalogue: %v", docs)
	}
	if len(docs) == 0 || docs[0].GetServer() != "memory" {
		t.Errorf("a paraphrase of the knowledge graph's tools found %v, want a memory tool first", docs)
	}
}

// TestWithoutTheModelSearchSaysNothingOfIt: a model directory that does
// not exist leaves search by words, with no note on the hits.
func TestWithoutTheModelSearchSaysNothingOfIt(t *testing.T) {
	t.Parallel()
	e := start(t, twoServers(t), func(c *discoveryd.Config) { c.SearchModel, c.SearchIndexWait = t.TempDir(), time.Minute })
	docs := search(t, e, "echo")
	if len(docs) == 0 || docs[0].GetMatchReason() != "exact name" {
		t.Errorf("search without a model: %v, want echo first by exact name and nothing more", docs)
	}
}

// TestAModelThatCannotRunIsLoggedOnce: a model directory without ONNX
// Runtime's library (a machine that lacks it, as a build without cgo
// does) leaves search by words, and says so in the log once however
// many services the process starts.
func TestAModelThatCannotRunIsLoggedOnce(t *testing.T) {
	t.Parallel()
	model := installedModel(t)
	dir := t.TempDir()
	for _, f := range []string{embed.ModelFile, embed.TokenizerFile} {
		b, err := os.ReadFile(filepath.Join(model, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	home := t.TempDir()
	writeJSON(t, filepath.Join(home, "MCPs", "servers.json"), map[string]any{"mcpServers": twoServers(t)})
	for range 2 {
		svc, err := discoveryd.New(discoveryd.Config{Home: home, Cwd: t.TempDir(), Getenv: os.Getenv, SearchModel: dir, SearchIndexWait: time.Minute}, logger)
		if err != nil {
			t.Fatal(err)
		}
		client := discoveryv1.NewDiscoveryServiceClient(grpctest.Start(t, svc.Register))
		resp, err := client.SearchTools(t.Context(), &discoveryv1.SearchToolsRequest{Query: "echo"})
		if err != nil || len(resp.GetDocs()) == 0 || resp.GetDocs()[0].GetMatchReason() != "exact name" {
			t.Errorf("search with a model that cannot run: %v, %v; want echo by exact name, by words", resp, err)
		}
		t.Cleanup(func() { _ = svc.Close() })
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "the search model cannot run here; tool search ranks by words only"); n != 1 {
		t.Errorf("the log says %d times that the model cannot run, want once:\n%s", n, logs.String())
	}
}

// lockedWriter serialises writes to a buffer shared by goroutines.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
