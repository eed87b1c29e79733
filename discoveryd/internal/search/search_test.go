package search

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestAppendWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"read_file", []string{"read", "file"}},
		{"getFileContents", []string{"get", "file", "contents", "getfilecontents"}},
		{"HTTPServer", []string{"http", "server", "httpserver"}},
		{"list-pull-requests", []string{"list", "pull", "requests"}},
		{"server.tool/name", []string{"server", "tool", "name"}},
		{"ec2 s3", []string{"ec", "ec2", "s3"}},
		{"oauth2Token", []string{"oauth", "token", "oauth2token"}},
		{"GitHub", []string{"git", "hub", "github"}},
		{"  Ünïcode wörds ", []string{"ünïcode", "wörds"}},
		{"plain 2026 v2", []string{"plain", "2026", "v2"}},            // runs that cannot split
		{"abc123 2fa", []string{"abc", "123", "abc123", "fa", "2fa"}}, // digits and letters in one run split
		{"ÜberTool", []string{"über", "tool", "übertool"}},
		{strings.Repeat("x", 70) + "YyZz", []string{strings.Repeat("x", 70), "yy", "zz", strings.Repeat("x", 70) + "yyzz"}}, // longer than the runes' array
		{"", nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			if got := appendWords(nil, tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("appendWords(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// testDocs is a small catalogue with deliberate traps: a description that
// repeats the words of another tool's name, two servers sharing a tool
// name, and an alias that differs from the name.
func testDocs() []Doc {
	return []Doc{
		{Server: "filesystem", ServerAlias: "filesystem", Tool: "read_file", ToolAlias: "read_file",
			Description: "Read the complete contents of a file from the file system.", Params: []string{"path"}},
		{Server: "filesystem", ServerAlias: "filesystem", Tool: "list_directory", ToolAlias: "list_directory",
			Description: "Get a detailed listing of all files and directories in a specified path.", Params: []string{"path"}},
		{Server: "notes", ServerAlias: "notes", Tool: "search", ToolAlias: "search",
			Description: "Read file read file read file: search notes by read_file history.", Params: []string{"query"}},
		{Server: "github", ServerAlias: "github", Tool: "create_issue", ToolAlias: "create_issue",
			Description: "Create a new issue in a GitHub repository", Params: []string{"owner", "repo", "title", "body"}},
		{Server: "gitlab", ServerAlias: "gitlab", Tool: "create_issue", ToolAlias: "create_issue",
			Description: "Create a new issue in a GitLab project", Params: []string{"project_id", "title"}},
		{Server: "google-calendar", ServerAlias: "google_calendar", Tool: "list-events", ToolAlias: "list_events",
			Description: "List events from one or more calendars.", Params: []string{"calendarId", "timeMin"}},
		{Server: "gitlab", ServerAlias: "gitlab", Tool: "list_events", ToolAlias: "list_events",
			Description: "List all events for the currently authenticated user.", Params: []string{"action"}},
		{Server: "playwright", ServerAlias: "playwright", Tool: "browser_take_screenshot", ToolAlias: "browser_take_screenshot",
			Description: "Take a screenshot of the current page.", Params: []string{"fullPage", "filename"}},
	}
}

func names(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Doc.Server + "/" + h.Doc.Tool
	}
	return out
}

func TestSearchRanking(t *testing.T) {
	t.Parallel()
	ix := NewIndex(testDocs())
	tests := []struct {
		query string
		first []string // the first hits, in order or as a set when tied
	}{
		// Exact names beat a description stuffed with the same words.
		{"read_file", []string{"filesystem/read_file"}},
		{"READ_FILE", []string{"filesystem/read_file"}},
		{"filesystem.read_file", []string{"filesystem/read_file"}},
		{"filesystem/read_file", []string{"filesystem/read_file"}},
		{"mcp__filesystem__read_file", []string{"filesystem/read_file"}},
		{"readFile", []string{"filesystem/read_file"}},
		{"search", []string{"notes/search"}},
		// The tool whose name is list_events beats one whose alias is.
		{"list_events", []string{"gitlab/list_events"}},
		{"list-events", []string{"google-calendar/list-events"}},
		{"google_calendar.list_events", []string{"google-calendar/list-events"}},
		{"gitlab/create_issue", []string{"gitlab/create_issue"}},
		// Natural language, word forms, synonyms, typos.
		{"show the folders", []string{"filesystem/list_directory"}},
		{"capture screenshots", []string{"playwright/browser_take_screenshot"}},
		{"screensht", []string{"playwright/browser_take_screenshot"}},
		{"scrren shot", []string{"playwright/browser_take_screenshot"}},
		{"calender events", []string{"google-calendar/list-events"}},
		{"calend events", []string{"google-calendar/list-events"}},
		{"screenshotting", []string{"playwright/browser_take_screenshot"}},
		{"open a ticket on github", []string{"github/create_issue"}},
		// An identifier inside a sentence is lifted too.
		{"how do I call list_directory here", []string{"filesystem/list_directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			t.Parallel()
			res := ix.Search(tt.query, 5)
			got := names(res.Hits)
			if len(got) < len(tt.first) || !slices.Equal(got[:len(tt.first)], tt.first) {
				t.Errorf("Search(%q) = %q, want it to start with %q", tt.query, got, tt.first)
			}
		})
	}
}

func TestSearchSharedNameRanksAllFirst(t *testing.T) {
	t.Parallel()
	ix := NewIndex(testDocs())
	got := names(ix.Search("create_issue", 5).Hits)
	if len(got) < 2 {
		t.Fatalf("Search(create_issue) = %q, want both create_issue tools", got)
	}
	top := slices.Clone(got[:2])
	slices.Sort(top)
	if want := []string{"github/create_issue", "gitlab/create_issue"}; !slices.Equal(top, want) {
		t.Errorf("first two hits = %q, want %q", top, want)
	}
	// Scores order the hits, so a caller may rely on Score alone.
	res := ix.Search("create_issue", 0)
	for i := 1; i < len(res.Hits); i++ {
		if res.Hits[i].Score > res.Hits[i-1].Score {
			t.Errorf("hit %d score %v > hit %d score %v", i, res.Hits[i].Score, i-1, res.Hits[i-1].Score)
		}
	}
}

func TestSearchTotalTruncated(t *testing.T) {
	t.Parallel()
	docs := testDocs()
	ix := NewIndex(docs)
	tests := []struct {
		query     string
		limit     int
		wantHits  int
		wantTotal int
	}{
		{"", 3, 3, len(docs)},
		{"", 0, len(docs), len(docs)},
		{"", 100, len(docs), len(docs)},
		// read_file matches too, weakly: "contents" is one of the senses
		// WordNet gives "issue".
		{"create issue", 1, 1, 3},
		{"create issue", 2, 2, 3},
		{"create issue", 0, 3, 3},
		{"zzzz qqqq", 5, 0, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%d", tt.query, tt.limit), func(t *testing.T) {
			t.Parallel()
			res := ix.Search(tt.query, tt.limit)
			if len(res.Hits) != tt.wantHits || res.Total != tt.wantTotal || res.Truncated != (tt.wantTotal > tt.wantHits) {
				t.Errorf("Search(%q, %d): hits %d total %d truncated %v; want hits %d total %d truncated %v",
					tt.query, tt.limit, len(res.Hits), res.Total, res.Truncated, tt.wantHits, tt.wantTotal, tt.wantTotal > tt.wantHits)
			}
		})
	}
	if got := names(ix.Search("", 2).Hits); !slices.Equal(got, []string{"filesystem/read_file", "filesystem/list_directory"}) {
		t.Errorf("empty query hits = %q, want catalogue order", got)
	}
}

func TestIndexCopiesDocs(t *testing.T) {
	t.Parallel()
	docs := testDocs()
	ix := NewIndex(docs)
	docs[0].Tool = "changed"
	if got := ix.Search("read_file", 1).Hits[0].Doc.Tool; got != "read_file" {
		t.Errorf("hit tool = %q after the caller changed its slice, want read_file", got)
	}
	if ix.Len() != len(docs) {
		t.Errorf("Len() = %d, want %d", ix.Len(), len(docs))
	}
	if empty := NewIndex(nil); empty.Len() != 0 || empty.Search("x", 5).Total != 0 || empty.Search("", 5).Total != 0 {
		t.Errorf("empty index returned matches")
	}
}

func TestSearchConcurrent(t *testing.T) {
	t.Parallel()
	ix := NewIndex(testDocs())
	queries := []string{"read_file", "create issue", "calender events", "", "screensht", "list folders"}
	want := make([][]string, len(queries))
	for i, q := range queries {
		want[i] = names(ix.Search(q, 5).Hits)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				k := (g + i) % len(queries)
				if got := names(ix.Search(queries[k], 5).Hits); !slices.Equal(got, want[k]) {
					t.Errorf("concurrent Search(%q) = %q, want %q", queries[k], got, want[k])
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzSearch checks the invariants of any answer: Total and Truncated agree
// with the hits, hits are ordered by score and never repeat.
func FuzzSearch(f *testing.F) {
	for _, q := range []string{"", "read_file", "create issue", "github/create_issue", "mcp__", "__/..:",
		"scrren shot", "ÄÖÜ ß", "a b c d e f g h i j k l m n o p q r s t u v w x y z aa bb cc dd ee ff gg hh ii jj"} {
		f.Add(q, 3)
	}
	ix := NewIndex(testDocs())
	f.Fuzz(func(t *testing.T, q string, limit int) {
		res := ix.Search(q, limit)
		if res.Total < len(res.Hits) || res.Truncated != (res.Total > len(res.Hits)) {
			t.Fatalf("Search(%q, %d): %d hits, total %d, truncated %v", q, limit, len(res.Hits), res.Total, res.Truncated)
		}
		if limit > 0 && len(res.Hits) > limit {
			t.Fatalf("Search(%q, %d): %d hits", q, limit, len(res.Hits))
		}
		seen := map[*Doc]bool{}
		for i, h := range res.Hits {
			if seen[h.Doc] {
				t.Fatalf("Search(%q): %s/%s twice", q, h.Doc.Server, h.Doc.Tool)
			}
			seen[h.Doc] = true
			if i > 0 && h.Score > res.Hits[i-1].Score {
				t.Fatalf("Search(%q): hit %d outscores hit %d", q, i, i-1)
			}
		}
	})
}

func TestParamsFromSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		schema    string
		wantNames []string
		wantText  string
	}{
		{`{"type":"object","properties":{"path":{"type":"string","description":"File path"},"encoding":{"type":"string"},"head":{"description":" First N lines "}}}`,
			[]string{"encoding", "head", "path"}, "First N lines File path"},
		{`{"type":"object"}`, nil, ""},
		{`{"type":"object","properties":{}}`, nil, ""},
		{`not json`, nil, ""},
		{``, nil, ""},
		{`{"properties":[1,2]}`, nil, ""},
	}
	for _, tt := range tests {
		names, text := ParamsFromSchema([]byte(tt.schema))
		if !slices.Equal(names, tt.wantNames) || text != tt.wantText {
			t.Errorf("ParamsFromSchema(%s) = %q, %q; want %q, %q", tt.schema, names, text, tt.wantNames, tt.wantText)
		}
	}
}

func TestSearchFunc(t *testing.T) {
	t.Parallel()
	ix := NewIndex(testDocs())
	onlyGitlab := func(d *Doc) bool { return d.Server == "gitlab" }
	tests := []struct {
		query     string
		limit     int
		keep      func(*Doc) bool
		want      []string
		wantTotal int
	}{
		{"create issue", 5, onlyGitlab, []string{"gitlab/create_issue"}, 1},
		{"create_issue", 5, onlyGitlab, []string{"gitlab/create_issue"}, 1},
		{"", 1, onlyGitlab, []string{"gitlab/create_issue"}, 2},
		{"", 0, onlyGitlab, []string{"gitlab/create_issue", "gitlab/list_events"}, 2},
		{"read_file", 5, onlyGitlab, []string{}, 0},
		{"create issue", 5, nil, []string{"filesystem/read_file", "github/create_issue", "gitlab/create_issue"}, 3},
		{"", 0, func(*Doc) bool { return false }, []string{}, 0},
	}
	for _, tt := range tests {
		res := ix.SearchFunc(tt.query, tt.limit, tt.keep)
		got := names(res.Hits)
		if tt.keep == nil {
			slices.Sort(got)
		}
		if !slices.Equal(got, tt.want) || res.Total != tt.wantTotal || res.Truncated != (tt.wantTotal > len(got)) {
			t.Errorf("SearchFunc(%q, %d) = %q total %d truncated %v; want %q total %d",
				tt.query, tt.limit, got, res.Total, res.Truncated, tt.want, tt.wantTotal)
		}
	}
}

func TestSearchWhy(t *testing.T) {
	t.Parallel()
	ix := NewIndex(testDocs())
	tests := []struct {
		query, tool string
		want        []string // parts the explanation must contain
	}{
		{"read_file", "filesystem/read_file", []string{"exact name"}},
		{"filesystem/read_file", "filesystem/read_file", []string{"exact alias or server-qualified name"}},
		{"readFile", "filesystem/read_file", []string{"tool name in the query"}},
		{"read flie", "filesystem/read_file", []string{"misspelt tool name"}},
		{"open a ticket on github", "github/create_issue", []string{"name: ", "issue (for ticket)", "server: github"}},
		{"screensht", "playwright/browser_take_screenshot", []string{"name: screenshot (for screensht)"}},
		{"calendar from google", "google-calendar/list-events", []string{"server: ", "calendar", "google"}},
		{"path", "filesystem/read_file", []string{"parameter: path"}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			t.Parallel()
			for _, h := range ix.Search(tt.query, 0).Hits {
				if h.Doc.Server+"/"+h.Doc.Tool != tt.tool {
					continue
				}
				for _, w := range tt.want {
					if !strings.Contains(h.Why, w) {
						t.Errorf("Search(%q): %s matched because %q, want it to say %q", tt.query, tt.tool, h.Why, w)
					}
				}
				return
			}
			t.Errorf("Search(%q) did not find %s", tt.query, tt.tool)
		})
	}
	// Every scored hit says something.
	for _, h := range ix.Search("list files in a folder", 0).Hits {
		if h.Why == "" {
			t.Errorf("%s/%s has no explanation", h.Doc.Server, h.Doc.Tool)
		}
	}
}

func TestSearchServerDescription(t *testing.T) {
	t.Parallel()
	do := "Manage DigitalOcean resources: droplets (virtual machines), volumes and domains."
	ix := NewIndex([]Doc{
		{Server: "digitalocean", ServerAlias: "digitalocean", Tool: "droplet-create", ToolAlias: "droplet_create",
			Description: "Create a new droplet.", ServerDescription: do},
		{Server: "digitalocean", ServerAlias: "digitalocean", Tool: "volume-create", ToolAlias: "volume_create",
			Description: "Create a block storage volume.", ServerDescription: do},
		{Server: "vms", ServerAlias: "vms", Tool: "vm_create", ToolAlias: "vm_create",
			Description: "Create a virtual machine."},
	})
	got := ix.Search("create a virtual machine", 5).Hits
	if n := names(got); len(n) < 3 || n[0] != "vms/vm_create" {
		t.Fatalf("Search(create a virtual machine) = %q, want vms/vm_create first (its own description says so) and both digitalocean tools after it", n)
	}
	for _, h := range got[1:] {
		if !strings.Contains(h.Why, "server description: virtual, machine") {
			t.Errorf("%s matched because %q, want the server description named", h.Doc.Tool, h.Why)
		}
	}
	// Only the server's description says "virtual machines": without it
	// the droplet tools would not match at all.
	if res := ix.Search("virtual machines", 0); res.Total != 3 {
		t.Errorf("Search(virtual machines) total %d, want 3", res.Total)
	}
}

// TestDenseRerankLiftsParaphrase checks the rerank end to end on a small
// index: a query in other words than the tool's finds it first, where
// BM25F alone ties the three tools on "get" and keeps index order.
func TestDenseRerankLiftsParaphrase(t *testing.T) {
	t.Parallel()
	ix := NewIndex([]Doc{
		{Server: "cloud", Tool: "font_get", Description: "Get a font by ID"},
		{Server: "cloud", Tool: "calendar_get", Description: "Get a calendar by ID"},
		{Server: "cloud", Tool: "instance_get", Description: "Get a virtual machine by ID"},
	})
	res := ix.Search("get my vm", 3)
	if len(res.Hits) == 0 || res.Hits[0].Doc.Tool != "instance_get" {
		t.Fatalf("hits %v, want instance_get first", res.Hits)
	}
	// Its explanation says that meaning lifted it. font_get's does not:
	// it tied with the others by its words and was first by index order,
	// so no rerank can have put it above one that was above it.
	for _, h := range res.Hits {
		lifted := strings.HasSuffix(h.Why, "ranked up by meaning")
		switch h.Doc.Tool {
		case "instance_get":
			if !lifted {
				t.Errorf("instance_get: why %q, want it to end in \"ranked up by meaning\"", h.Why)
			}
		case "font_get":
			if lifted {
				t.Errorf("font_get: why %q, want no \"ranked up by meaning\": nothing was above it", h.Why)
			}
		}
	}
}
