package upstream

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Sentinel errors. Every error the Manager returns wraps exactly one of
// them, and its message is written for the person who has to fix it.
var (
	// ErrUnknownServer: the name is not configured.
	ErrUnknownServer = errors.New("unknown MCP server")
	// ErrUnknownTool: the server has no tool of that name.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrStartFailed: the server could not be started or initialised.
	ErrStartFailed = errors.New("MCP server failed to start")
	// ErrTimeout: the upstream call outlived its timeout.
	ErrTimeout = errors.New("MCP server did not answer in time")
	// ErrCrashed: the server exited or its connection broke.
	ErrCrashed = errors.New("MCP server crashed")
	// ErrClosed: the Manager is shut down.
	ErrClosed = errors.New("upstream manager is closed")
	// ErrRejected: the server is alive but answered the request with a
	// JSON-RPC error (for example invalid params).
	ErrRejected = errors.New("MCP server rejected the request")
)

func unknownServer(name string, configured []string) error {
	if len(configured) == 0 {
		return fmt.Errorf("%w %q: no MCP servers are configured (add them to ~/MCPs/*.json, a client config such as ~/.claude.json, or the file named by MCP_SERVERS_CONFIG)", ErrUnknownServer, name)
	}
	return fmt.Errorf("%w %q; configured servers: %s", ErrUnknownServer, name, strings.Join(configured, ", "))
}

// UnknownToolError is the ErrUnknownTool for a tool name that is not in
// names (the server's tools), naming similar ones.
func UnknownToolError(server, tool string, names []string) error {
	if similar := similarNames(tool, names, 5); len(similar) > 0 {
		return fmt.Errorf("%w %q on server %q; did you mean: %s", ErrUnknownTool, tool, server, strings.Join(similar, ", "))
	}
	if len(names) == 0 {
		return fmt.Errorf("%w %q: server %q offers no tools", ErrUnknownTool, tool, server)
	}
	shown := names
	more := ""
	if len(shown) > 15 {
		shown, more = shown[:15], fmt.Sprintf(" (and %d more)", len(names)-15)
	}
	return fmt.Errorf("%w %q on server %q; its tools are: %s%s", ErrUnknownTool, tool, server, strings.Join(shown, ", "), more)
}

// similarNames returns up to limit names close to want: those containing it
// or contained in it, or within an edit distance of about a third of its
// length, closest first. Case, "-" and "_" are ignored.
func similarNames(want string, names []string, limit int) []string {
	norm := func(s string) string {
		return strings.NewReplacer("-", "", "_", "", " ", "").Replace(strings.ToLower(s))
	}
	w := norm(want)
	type cand struct {
		name string
		dist int
	}
	var cands []cand
	for _, n := range names {
		nn := norm(n)
		d := editDistance(w, nn)
		if (len(w) >= 3 && (strings.Contains(nn, w) || strings.Contains(w, nn))) || d <= max3(2, len(w)/3) {
			cands = append(cands, cand{n, d})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].dist < cands[j].dist })
	var out []string
	for i := 0; i < len(cands) && i < limit; i++ {
		out = append(out, cands[i].name)
	}
	return out
}

func max3(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
