package config

import (
	"fmt"
	"path/filepath"
	"strings"
)

// projectKey returns the key of ~/.claude.json's "projects" for the
// project the bridge runs in: the deepest <dir> that is cwd or contains
// it, as written in the file. It is "" when none is.
func projectKey(doc map[string]any, cwd string) string {
	projects, ok := doc["projects"].(map[string]any)
	if !ok || cwd == "" {
		return ""
	}
	best := ""
	for dir := range projects {
		clean := filepath.Clean(dir)
		if (cwd == clean || strings.HasPrefix(cwd, strings.TrimSuffix(clean, "/")+"/")) && len(dir) > len(best) {
			best = dir
		}
	}
	return best
}

// projectLayout returns where ~/.claude.json keeps the servers Claude Code
// added for project ("local" scope, what `claude mcp add` writes by
// default): projects.<project>.mcpServers. Claude Code prefers them to the
// user-scope top-level "mcpServers", and so does the first-wins rule here.
func projectLayout(project string) []string {
	return []string{"projects", project, "mcpServers"}
}

// disabledKey names project's disabledMcpServers for messages.
func disabledKey(project string) string {
	return fmt.Sprintf("projects.%q.disabledMcpServers", project)
}

// projectDisabled reads projects.<project>.disabledMcpServers, the names
// of the servers the user turned off for the project in Claude Code's
// /mcp menu. They apply to every server of the file that holds them, the
// project's own and the user-scope ones alike. A value that is not a list
// is reported in res and disables nothing; so is an item that is not a
// string, while the names beside it still count.
func projectDisabled(doc map[string]any, project, path string, res *Result) map[string]bool {
	raw, _ := lookupPath(doc, []string{"projects", project, "disabledMcpServers"})
	if raw == nil {
		return nil
	}
	const accepted = "accepted: a list of server names (strings), as Claude Code's /mcp writes it"
	list, ok := raw.([]any)
	if !ok {
		res.Warnings = append(res.Warnings, Warning{Path: path,
			Reason: fmt.Sprintf("%s is %s, not a list; %s, so it disables no server", disabledKey(project), kind(raw), accepted)})
		return nil
	}
	out := make(map[string]bool, len(list))
	for i, v := range list {
		name, ok := v.(string)
		if !ok {
			what := kind(v)
			if v != nil {
				what += " (" + str(v) + ")"
			}
			res.Warnings = append(res.Warnings, Warning{Path: path,
				Reason: fmt.Sprintf("%s item %d is %s, not a server name; %s, so it disables no server (the names beside it still do)", disabledKey(project), i+1, what, accepted)})
			continue
		}
		out[name] = true
	}
	return out
}
