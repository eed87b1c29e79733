// Package alias names servers and tools the way upstream does, so that a
// sandbox's proxies (mcp_<server>.<tool>) are valid Python identifiers and
// prompts written for upstream find the same names. discoveryd is the only
// place these rules live: the sandbox gets every alias from it.
package alias

import (
	"regexp"
	"strconv"
	"strings"
)

// nonIdent matches the runs that an alias turns into "_". Names are
// lowercased first, so no capital letter is left to keep.
var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// pythonKeywords is Python's keyword.kwlist: a tool alias equal to one of
// them gets a "_" suffix so that mcp_x.<alias> is valid syntax.
var pythonKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true, "def": true,
	"del": true, "elif": true, "else": true, "except": true, "finally": true, "for": true,
	"from": true, "global": true, "if": true, "import": true, "in": true, "is": true,
	"lambda": true, "nonlocal": true, "not": true, "or": true, "pass": true, "raise": true,
	"return": true, "try": true, "while": true, "with": true, "yield": true,
}

// ident is what both aliases do first: lowercase, runs outside
// [a-z0-9_] become "_", an empty result becomes empty, and a leading
// digit gets a "_" prefix.
func ident(name, empty string) string {
	a := nonIdent.ReplaceAllString(strings.ToLower(name), "_")
	if a == "" {
		a = empty
	}
	if a[0] >= '0' && a[0] <= '9' {
		a = "_" + a
	}
	return a
}

// Server is upstream's server alias before collisions (see Unique).
func Server(name string) string { return ident(name, "server") }

// Tool is upstream's tool alias before collisions: as for a server, and a
// Python keyword gets a "_" suffix.
func Tool(name string) string {
	a := ident(name, "tool")
	if pythonKeywords[a] {
		a += "_"
	}
	return a
}

// Unique returns base, or base_2, base_3… for the first one not in taken,
// and records it.
func Unique(base string, taken map[string]bool) string {
	a := base
	for n := 2; taken[a]; n++ {
		a = base + "_" + strconv.Itoa(n)
	}
	taken[a] = true
	return a
}

// Tools assigns aliases to one server's tool names, in order.
func Tools(names []string) []string {
	taken := map[string]bool{}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = Unique(Tool(n), taken)
	}
	return out
}
