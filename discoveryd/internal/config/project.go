package config

import (
	"fmt"
	"os"
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

// mcpjsonRejected reads the servers of the project's .mcp.json that the
// user rejected in Claude Code (the disabledMcpjsonServers of its
// settings: ~/.claude/settings.json, the project's .claude/settings.json
// and .claude/settings.local.json, and ~/.claude.json's project, where
// older versions keep it), mapped to the file that says so. Claude Code
// does not start them, and neither does the bridge. A file that cannot
// be parsed is reported and rejects nothing.
func mcpjsonRejected(opts Options, res *Result) map[string]string {
	out := map[string]string{}
	read := func(path string, keyPath func(doc map[string]any) []string) {
		data, err := os.ReadFile(path)
		if err != nil {
			return // absent: nothing rejected there
		}
		doc, err := decode(path, data)
		if err != nil {
			res.Warnings = append(res.Warnings, Warning{Path: path, Reason: err.Error() + "; its disabledMcpjsonServers, if any, reject no server of .mcp.json"})
			return
		}
		key := keyPath(doc)
		if key == nil {
			return
		}
		raw, _ := lookupPath(doc, key)
		list, ok := raw.([]any)
		if raw != nil && !ok {
			res.Warnings = append(res.Warnings, Warning{Path: path,
				Reason: fmt.Sprintf("%s is %s, not a list of server names, so it rejects no server of .mcp.json", keyName(key), kind(raw))})
		}
		for _, v := range list {
			if name, ok := v.(string); ok && out[name] == "" {
				out[name] = fmt.Sprintf("%s of %s", keyName(key), path)
			}
		}
	}
	top := func(map[string]any) []string { return []string{"disabledMcpjsonServers"} }
	for _, path := range claudeSettings(opts) {
		read(path, top)
	}
	if opts.Home != "" {
		read(filepath.Join(opts.Home, ".claude.json"), func(doc map[string]any) []string {
			if p := projectKey(doc, opts.Cwd); p != "" {
				return []string{"projects", p, "disabledMcpjsonServers"}
			}
			return nil
		})
	}
	return out
}

// keyName writes a key path for messages, a project's directory quoted
// as disabledKey does.
func keyName(key []string) string {
	if len(key) == 3 && key[0] == "projects" {
		return fmt.Sprintf("projects.%q.%s", key[1], key[2])
	}
	return strings.Join(key, ".")
}

// claudeSettings are Claude Code's settings files for the project, the
// closest first.
func claudeSettings(opts Options) []string {
	var out []string
	if opts.Cwd != "" {
		out = append(out, filepath.Join(opts.Cwd, ".claude", "settings.local.json"), filepath.Join(opts.Cwd, ".claude", "settings.json"))
	}
	if opts.Home != "" {
		out = append(out, filepath.Join(opts.Home, ".claude", "settings.json"))
	}
	return out
}

// withoutRejected drops the servers of the project's .mcp.json that
// rejected names (mcpjsonRejected), as skipped.
func withoutRejected(servers []Server, rejected map[string]string, path string, res *Result) []Server {
	out := servers[:0]
	for _, s := range servers {
		if where := rejected[s.Name]; where != "" {
			res.Skipped = append(res.Skipped, Warning{Path: path, Server: s.Name,
				Reason: "rejected for this project in Claude Code (" + where + ")"})
			continue
		}
		out = append(out, s)
	}
	return out
}
