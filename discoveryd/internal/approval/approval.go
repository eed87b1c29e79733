// Package approval decides which tool calls a person must approve before
// they run: the operator's --approve rules (SERVER.TOOL globs, or
// "destructive" for every tool whose annotations do not say it is
// read-only) and the "approve" key of a server's config entry. discoveryd
// refuses such a call unless its caller says a person approved it.
package approval

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// Destructive is the rule word that marks every tool whose
// destructiveHint is true or whose readOnlyHint is not true.
const Destructive = "destructive"

// Rule is one approval rule.
type Rule struct {
	// Server and Tool are globs (path.Match: * ? [...]) over the server's
	// and the tool's names. A config entry's rules name their own server,
	// escaped.
	Server, Tool string
	// Destructive, instead of Tool, marks the tools whose annotations do
	// not say they are read-only.
	Destructive bool
	// Source is where the rule was given, for reasons and warnings:
	// `--approve github.delete_*`, or the config entry.
	Source string
}

// Accepted describes the forms of --approve, for errors.
const Accepted = `SERVER.TOOL (globs: * ? [...], e.g. github.delete_* or *.send_*), SERVER.* for every tool of a server, or "destructive"`

// ParseFlag reads one --approve value.
func ParseFlag(v string) (Rule, error) {
	v = strings.TrimSpace(v)
	src := "--approve " + v
	if strings.EqualFold(v, Destructive) {
		return Rule{Server: "*", Destructive: true, Source: src}, nil
	}
	server, tool, ok := strings.Cut(v, ".")
	if !ok || server == "" || tool == "" {
		hint := ""
		if v != "" && !ok {
			hint = fmt.Sprintf(" (for every tool of server %q: %s.*)", v, v)
		}
		return Rule{}, fmt.Errorf("--approve %q: expected %s%s", v, Accepted, hint)
	}
	if err := checkGlob(server); err != nil {
		return Rule{}, fmt.Errorf("--approve %q: server pattern: %w", v, err)
	}
	if err := checkGlob(tool); err != nil {
		return Rule{}, fmt.Errorf("--approve %q: tool pattern: %w", v, err)
	}
	return Rule{Server: server, Tool: tool, Source: src}, nil
}

// ParseFlags reads every --approve value; empty values are skipped.
func ParseFlags(vs []string) ([]Rule, error) {
	var rules []Rule
	var errs []error
	for _, v := range vs {
		if strings.TrimSpace(v) == "" {
			continue
		}
		r, err := ParseFlag(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rules = append(rules, r)
	}
	return rules, errors.Join(errs...)
}

// EntryRules reads the values of a config entry's "approve" key (tool
// globs or "destructive"; the config package turns true into "*"); the
// config package has checked them with CheckEntryValue.
func EntryRules(server, source string, vs []string) []Rule {
	var rules []Rule
	lit := literal(server)
	for _, v := range vs {
		src := fmt.Sprintf("\"approve\": %q in the entry of server %q (%s)", v, server, source)
		if strings.EqualFold(v, Destructive) {
			rules = append(rules, Rule{Server: lit, Destructive: true, Source: src})
			continue
		}
		rules = append(rules, Rule{Server: lit, Tool: v, Source: src})
	}
	return rules
}

// CheckEntryValue checks one value of a config entry's "approve" key.
func CheckEntryValue(v string) error {
	if strings.EqualFold(v, Destructive) {
		return nil
	}
	return checkGlob(v)
}

// literal escapes s so that, as a glob, it matches s alone.
func literal(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`).Replace(s)
}

// checkGlob refuses a malformed pattern, which path.Match would only
// report when it is used.
func checkGlob(p string) error {
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("%q is not a valid glob (* ? [...] and \\ to escape)", p)
	}
	return nil
}

// MatchesServer reports whether the rule can apply to a tool of server.
func (r Rule) MatchesServer(server string) bool {
	ok, _ := path.Match(r.Server, server)
	return ok
}

// reason says why the rule marks tool of server, or "" when it does not.
func (r Rule) reason(server string, tool mcp.Tool) string {
	if !r.MatchesServer(server) {
		return ""
	}
	if r.Destructive {
		if why := destructive(tool.Annotations); why != "" {
			return r.Source + ": " + why
		}
		return ""
	}
	if ok, _ := path.Match(r.Tool, tool.Name); ok {
		return r.Source
	}
	return ""
}

// destructive says why annotations leave a tool marked by "destructive":
// destructiveHint true, or readOnlyHint not true (MCP's defaults are
// readOnlyHint false and destructiveHint true). "" when the tool says it
// is read-only and not destructive.
func destructive(a mcp.ToolAnnotation) string {
	switch {
	case a.DestructiveHint != nil && *a.DestructiveHint:
		return "destructiveHint is true"
	case a.ReadOnlyHint == nil:
		return "readOnlyHint is not set"
	case !*a.ReadOnlyHint:
		return "readOnlyHint is false"
	}
	return ""
}

// Reason says why a call of tool on server needs a person's approval under
// rules (the flags' and the server's entry's), or "" when it does not.
func Reason(rules []Rule, server string, tool mcp.Tool) string {
	for _, r := range rules {
		if why := r.reason(server, tool); why != "" {
			return why
		}
	}
	return ""
}

// Unmatched returns the tool rules that match none of tools, which are
// the tools of the configured servers by server name. A rule that matches
// a server whose tools are not known (unknown: it did not list) is not
// judged; one that matches no server at all is unmatched.
func Unmatched(rules []Rule, tools map[string][]mcp.Tool, unknown []string) []Rule {
	var out []Rule
	for _, r := range rules {
		if r.Destructive {
			continue
		}
		matched, judged := false, true
		for _, s := range unknown {
			if r.MatchesServer(s) {
				judged = false
			}
		}
		for s, ts := range tools {
			if !r.MatchesServer(s) {
				continue
			}
			for _, t := range ts {
				if ok, _ := path.Match(r.Tool, t.Name); ok {
					matched = true
				}
			}
		}
		if judged && !matched {
			out = append(out, r)
		}
	}
	return out
}
