package config

import (
	"fmt"
	"slices"
	"strings"
)

// metaKeys are top-level keys of a server config that hold no servers:
// a file with only these is empty, not misspelt.
var metaKeys = []string{"$schema", "description", "inputs"}

// acceptedKeys names the top-level keys that hold servers, for messages.
const acceptedKeys = `"mcpServers", "servers" (VS Code), "mcp_servers" (Codex), "mcp" (OpenCode), "context_servers" (Zed)`

// noServersKey explains a server config in which no key holds servers,
// naming the keys it has and, when one differs from an accepted key only
// in case or punctuation, that key. It is empty for a file with no keys
// but metaKeys.
func noServersKey(doc map[string]any) string {
	var keys []string
	for _, k := range sortedKeys(doc) {
		if !slices.Contains(metaKeys, k) {
			keys = append(keys, fmt.Sprintf("%q", k))
		}
	}
	if len(keys) == 0 {
		return ""
	}
	hint := ""
	for _, k := range sortedKeys(doc) {
		if want := likeLayoutKey(k); want != "" {
			hint = fmt.Sprintf(` (did you mean %q?)`, want)
			break
		}
	}
	if len(keys) > 5 {
		keys = append(keys[:5], "…")
	}
	return fmt.Sprintf("no servers read: none of its keys (%s) holds servers%s; the keys that do are %s, spelt exactly so", strings.Join(keys, ", "), hint, acceptedKeys)
}

// likeLayoutKey returns the top-level layout key that k spells but for
// case, "_", "-", "." and spaces, or "".
func likeLayoutKey(k string) string {
	norm := strings.NewReplacer("_", "", "-", "", ".", "", " ", "").Replace(strings.ToLower(k))
	for _, l := range layouts {
		if strings.NewReplacer("_", "", ".", "").Replace(strings.ToLower(l[0])) == norm {
			return l[0]
		}
	}
	return ""
}
