package discoveryd

import (
	"regexp"
	"strconv"
	"strings"
)

var (
	nonServerChars = regexp.MustCompile(`[^a-z0-9_]+`)
	nonToolChars   = regexp.MustCompile(`[^0-9a-zA-Z_]+`)
)

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

// serverAliasBase is upstream's server alias before collisions: lowercase,
// runs outside [a-z0-9_] become "_", and a leading digit gets a "_" prefix.
func serverAliasBase(name string) string {
	a := nonServerChars.ReplaceAllString(strings.ToLower(name), "_")
	if a == "" {
		a = "server"
	}
	if a[0] >= '0' && a[0] <= '9' {
		a = "_" + a
	}
	return a
}

// toolAliasBase is upstream's tool alias before collisions: lowercase, runs
// outside [0-9a-zA-Z_] become "_", a leading digit gets a "_" prefix, and a
// Python keyword gets a "_" suffix.
func toolAliasBase(name string) string {
	a := nonToolChars.ReplaceAllString(strings.ToLower(name), "_")
	if a == "" {
		a = "tool"
	}
	if a[0] >= '0' && a[0] <= '9' {
		a = "_" + a
	}
	if pythonKeywords[a] {
		a += "_"
	}
	return a
}

// uniqueAlias returns base, or base_2, base_3… for the first one not in
// taken, and records it.
func uniqueAlias(base string, taken map[string]bool) string {
	a := base
	for n := 2; taken[a]; n++ {
		a = base + "_" + strconv.Itoa(n)
	}
	taken[a] = true
	return a
}

// toolAliases assigns aliases to tool names in order.
func toolAliases(names []string) []string {
	taken := map[string]bool{}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = uniqueAlias(toolAliasBase(n), taken)
	}
	return out
}
