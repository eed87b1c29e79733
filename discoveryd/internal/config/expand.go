package config

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// varRef matches ${VAR} and ${env:VAR}.
var varRef = regexp.MustCompile(`\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}`)

// expander replaces variable references and remembers the ones that are
// not defined, so that the entry can be reported instead of started with a
// silently empty token.
type expander struct {
	lookup  func(string) (string, bool)
	missing []string
}

func (x *expander) expand(s string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := varRef.FindStringSubmatch(ref)[1]
		if x.lookup != nil {
			if v, ok := x.lookup(name); ok {
				return v
			}
		}
		if !slices.Contains(x.missing, name) {
			x.missing = append(x.missing, name)
		}
		return ""
	})
}

// selfNames are upstream's names for itself (_looks_like_self_server) and
// ours: a client config that launches `codeexec serve` is read by that same
// codeexec, and following it would start codeexec inside itself.
var selfNames = []string{"mcp-server-code-execution-mode", "mcp_server_code_execution_mode", "codeexec"}

// looksLikeSelf reports whether an entry would start this bridge again,
// which would recurse. It keeps upstream's rule: the name, the
// command's basename, or any argument or argument basename is one of
// selfNames, or any of those ends with "mcp_server_code_execution_mode.py".
func looksLikeSelf(s Server) bool {
	candidates := []string{s.Name}
	if s.Command != "" {
		candidates = append(candidates, filepath.Base(s.Command))
	}
	for _, a := range s.Args {
		candidates = append(candidates, a, filepath.Base(a))
	}
	for _, c := range candidates {
		if slices.Contains(selfNames, c) || strings.HasSuffix(c, "mcp_server_code_execution_mode.py") {
			return true
		}
	}
	return false
}
