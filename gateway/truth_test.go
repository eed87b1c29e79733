package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/gateway/internal/capabilities"
	"github.com/codeexec/codeexec/gateway/internal/params"
	"github.com/codeexec/codeexec/gateway/internal/runpython"
	"github.com/codeexec/codeexec/sandboxd"
)

// claim is a statement about a behaviour that a text may make: every
// match of pattern must agree with the code, and a required claim must be
// made by each text the agent reads.
type claim struct {
	name string
	// pattern matches the statement; its first group, if any, is the
	// figure, which must equal want.
	pattern  *regexp.Regexp
	want     string
	required bool
}

// falsehood is a statement no text may make.
type falsehood struct {
	name    string
	pattern *regexp.Regexp
}

func claims() []claim {
	d := sandboxd.DefaultConfig()
	return []claim{
		{name: "state comes back after a timeout", required: true,
			pattern: regexp.MustCompile(`(?is)(come back|comes back|restores?)[^.]{0,160}timeout|timeout[^.]{0,80}(come back|comes back|restores? the)`)},
		{name: "default timeout", want: strconv.Itoa(int(d.DefaultTimeout / time.Second)),
			pattern: regexp.MustCompile(`(?i)\ba (\d+) ?s timeout|default timeout[^.\d]{0,20}(\d+) ?s\b|timeout[^.\d]{0,20}(\d+) ?s by default`)},
		{name: "maximum timeout", want: strconv.Itoa(int(d.MaxTimeout / time.Second)),
			pattern: regexp.MustCompile(`(?i)timeout of at most (\d+) ?s|maximum timeout[^.\d]{0,20}(\d+) ?s\b`)},
		{name: "memory limit", want: strconv.Itoa(int(d.MemoryBytes >> 20)),
			pattern: regexp.MustCompile(`(?i)\b(\d+) ?(?:MiB|MB)(?: of)? memory\b|memory (?:limit|cap)(?: of| is)? (\d+) ?(?:MiB|MB|m)\b|by default (\d+) ?MiB`)},
		{name: "process limit", want: strconv.Itoa(d.Pids),
			// A limit: "512 MiB of memory, 128 processes, …", not a count
			// such as "a search started 0 processes".
			pattern: regexp.MustCompile(`(?i)\b(\d+) processes and threads|(?:memory|limits?)[^.]{0,40}?\b(\d+) processes`)},
		{name: "output cap", want: strconv.Itoa(int(d.OutputLimitBytes >> 10)),
			pattern: regexp.MustCompile(`(?i)output is capped[^.]{0,40}?\b(\d+) ?KiB|\b(\d+) ?KiB per stream`)},
		{name: "session TTL", want: strconv.Itoa(int(d.SessionTTL / time.Hour)),
			pattern: regexp.MustCompile(`(?i)session-ttl[^|]*\|[^|]*\|\s*(\d+)h`)},
		{name: "failed tool calls raise", required: true, pattern: regexp.MustCompile(`ToolError`)},
	}
}

var falsehoods = []falsehood{
	{"a timeout loses the state", regexp.MustCompile(`(?i)timeout[^.]{0,80}(state (is|was) lost|loses the (session|state)|starts? (a )?fresh)`)},
	{"the timeout is clamped", regexp.MustCompile(`(?i)timeout[^.]{0,40}clamped`)},
	{"workspace files last for the session", regexp.MustCompile(`(?i)/workspace[^.]{0,40}last for the session`)},
	{"workspace files are lost with the sandbox", regexp.MustCompile(`(?i)/workspace[^.]{0,60}(not (in the )?checkpoint|loses them)`)},
	{"a tool call returns its error as a dict", regexp.MustCompile(`(?i)isError[^.]{0,40}does not raise`)},
}

// texts are what the agent and the user read: the tool's description and
// schema, the capabilities resource, the sandbox's manual (the agent's
// source), the README and docs/*.md.
func texts(t *testing.T) map[string]string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tool := runpython.New(runpython.Options{Limits: params.Limits{DefaultSeconds: 30, MaxSeconds: 120}}).Definition()
	out := map[string]string{
		"tool description":       tool.Description,
		"capabilities resource":  capabilities.Text,
		"capability_summary()":   manual(t, filepath.Join(root, "sandboxd/internal/agent/codeexec_runtime.py")),
		"agent README":           read(t, filepath.Join(root, "sandboxd/internal/agent/README.md")),
		"README.md":              read(t, filepath.Join(root, "README.md")),
		"tool schema (raw JSON)": string(tool.RawInputSchema),
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md under %s: %v", root, err)
	}
	for _, p := range docs {
		out["docs/"+filepath.Base(p)] = read(t, p)
	}
	return out
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// manual is the text of capability_summary(): _MANUAL in the agent.
func manual(t *testing.T, path string) string {
	t.Helper()
	src := read(t, path)
	_, rest, ok := strings.Cut(src, `_MANUAL = """`)
	body, _, ok2 := strings.Cut(rest, `"""`)
	if !ok || !ok2 {
		t.Fatalf("no _MANUAL in %s", path)
	}
	return body
}

// lines joins a text's lines (markdown wraps sentences), so that a
// statement is matched whole.
func unwrap(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestEveryTextTellsTheTruth reads every text the agent or the user reads
// and checks each statement about a behaviour against the code's own
// constants (sandboxd.DefaultConfig), and that none says what is false.
func TestEveryTextTellsTheTruth(t *testing.T) {
	t.Parallel()
	required := map[string]bool{"tool description": false, "capabilities resource": true, "capability_summary()": true}
	for name, text := range texts(t) {
		text = unwrap(text)
		for _, f := range falsehoods {
			if m := f.pattern.FindString(text); m != "" {
				t.Errorf("%s says %s: %q", name, f.name, m)
			}
		}
		for _, c := range claims() {
			ms := c.pattern.FindAllStringSubmatch(text, -1)
			if len(ms) == 0 && c.required && (required[name] || (name == "tool description" && c.name != "failed tool calls raise")) {
				t.Errorf("%s does not say %s", name, c.name)
			}
			for _, m := range ms {
				if got := figure(m); c.want != "" && got != c.want {
					t.Errorf("%s gives the %s as %s; the code's is %s: %q", name, c.name, got, c.want, m[0])
				}
			}
		}
	}
}

// figure is the first non-empty group of a match.
func figure(m []string) string {
	for _, g := range m[1:] {
		if g != "" {
			return g
		}
	}
	return ""
}

// TestTruthClaimsMatch keeps the patterns honest: each finds the
// statement it is for, and the falsehoods find what the texts said
// before issue 37.
func TestTruthClaimsMatch(t *testing.T) {
	t.Parallel()
	for _, f := range falsehoods {
		for _, s := range []string{
			"A timeout stops the sandbox: its state is lost and the next call starts fresh.",
			"memory, process count and time are capped (a timeout loses the session);",
			"Invalid input gives validation_error. The timeout is clamped to 1..max.",
			"Files written to /workspace last for the session.",
			"Files in /workspace are not in the checkpoint: a timeout or crash loses them.",
			"A tool that returns isError:true does not raise.",
		} {
			if f.pattern.MatchString(s) {
				goto found
			}
		}
		t.Errorf("falsehood %q matches none of the old statements", f.name)
	found:
	}
	for _, c := range claims() {
		sample := map[string]string{
			"state comes back after a timeout": "variables come back after a timeout or crash",
			"default timeout":                  "a 30 s timeout",
			"maximum timeout":                  "a timeout of at most 3600 s",
			"memory limit":                     "512 MiB of memory",
			"process limit":                    "128 processes and threads",
			"output cap":                       "output is capped per call (256 KiB per stream)",
			"session TTL":                      "| `--session-ttl` | `CODEEXEC_SESSION_TTL` | 168h | how long",
			"failed tool calls raise":          "raises runtime.ToolError",
		}[c.name]
		m := c.pattern.FindStringSubmatch(sample)
		if m == nil || (c.want != "" && figure(m) != c.want) {
			t.Errorf("claim %q: %q gives %v", c.name, sample, m)
		}
		if c.want != "" {
			wrong := strings.Replace(sample, c.want, fmt.Sprint(mustAtoi(t, c.want)+1), 1)
			if m := c.pattern.FindStringSubmatch(wrong); m == nil || figure(m) == c.want {
				t.Errorf("claim %q: a wrong figure (%q) is not caught", c.name, wrong)
			}
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
