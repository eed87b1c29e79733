package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// layouts are the places inside a config file where server maps live, in
// the order they are read. Upstream reads only "mcpServers"; the others are
// VS Code's workspace mcp.json ("servers"), VS Code's settings.json
// ("mcp": {"servers"} or the flat key "mcp.servers"), Codex's TOML
// ("mcp_servers"), OpenCode's "mcp" (servers directly under it) and Zed's
// "context_servers". Claude Code's per-project servers come before all of
// them (projectLayout).
var layouts = [][]string{
	{"mcpServers"},
	{"servers"},
	{"mcp", "servers"},
	{"mcp.servers"},
	{"mcp_servers"},
	{"mcp"},
	{"context_servers"},
}

// vsCodeMCPKeys are the keys of VS Code's "mcp" setting that are not
// servers; the OpenCode layout skips them.
var vsCodeMCPKeys = []string{"servers", "inputs"}

// loadFile parses one config file. Problems go to res; the servers that
// could be parsed are returned. serversOnly is Source.ServersOnly.
func loadFile(path string, serversOnly bool, opts Options, res *Result) []Server {
	data, err := os.ReadFile(path)
	if err != nil {
		res.Warnings = append(res.Warnings, Warning{Path: path, Reason: "cannot read file: " + err.Error()})
		return nil
	}
	doc, err := decode(path, data)
	if err != nil {
		res.Warnings = append(res.Warnings, Warning{Path: path, Reason: err.Error()})
		return nil
	}
	fileDesc, _ := doc["description"].(string)
	seen := map[string]bool{}
	var out []Server
	all := layouts
	var disabled map[string]bool
	vars := predefinedVars(path, opts.Cwd, opts.Home)
	project := projectKey(doc, opts.Cwd)
	if project != "" {
		all = append([][]string{projectLayout(project)}, layouts...)
		disabled = projectDisabled(doc, project, path, res)
	}
	found := false
	for _, layout := range all {
		entries, ok := lookupPath(doc, layout)
		if !ok {
			continue
		}
		found = true
		m, ok := entries.(map[string]any)
		if !ok {
			res.Warnings = append(res.Warnings, Warning{Path: path, Reason: fmt.Sprintf("%q must be an object of servers, got %s", strings.Join(layout, "."), kind(entries))})
			continue
		}
		openCode := len(layout) == 1 && layout[0] == "mcp"
		for _, name := range sortedKeys(m) {
			if seen[name] || (openCode && slices.Contains(vsCodeMCPKeys, name)) {
				continue
			}
			seen[name] = true
			if strings.TrimSpace(name) == "" {
				// Found by FuzzLoadFile: an empty key made a server with no
				// name, which no call could name.
				res.Warnings = append(res.Warnings, Warning{Path: path, Server: name,
					Reason: fmt.Sprintf("a server under %q has an empty name: give it a name (its key) to use it", strings.Join(layout, "."))})
				continue
			}
			if disabled[name] {
				res.Skipped = append(res.Skipped, Warning{Path: path, Server: name,
					Reason: fmt.Sprintf("disabled for project %s in Claude Code (%s)", project, disabledKey(project))})
				continue
			}
			s, skip, err := parseEntry(name, m[name], fileDesc, vars, opts)
			switch {
			case err != nil:
				res.Warnings = append(res.Warnings, Warning{Path: path, Server: name, Reason: err.Error()})
			case skip != "":
				res.Skipped = append(res.Skipped, Warning{Path: path, Server: name, Reason: skip})
			default:
				s.Source = path
				out = append(out, s)
			}
		}
	}
	if !found && serversOnly {
		if reason := noServersKey(doc); reason != "" {
			res.Warnings = append(res.Warnings, Warning{Path: path, Reason: reason})
		}
	}
	return out
}

// decode reads JSON (comments and trailing commas allowed, as VS Code
// writes them) or, for a .toml file, TOML.
func decode(path string, data []byte) (map[string]any, error) {
	var doc map[string]any
	if strings.EqualFold(filepath.Ext(path), ".toml") {
		if _, err := toml.Decode(string(data), &doc); err != nil {
			return nil, tomlError(err)
		}
		return doc, nil
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return map[string]any{}, nil
	}
	v, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("invalid config: the top level must be an object, got %s", kind(v))
	}
	return doc, nil
}

func lookupPath(doc map[string]any, path []string) (any, bool) {
	var cur any = doc
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// parseEntry turns one entry into a Server. skip is set, with the reason,
// for entries left out on purpose; err for entries that cannot be used.
// vars are the predefined variables of the file (predefinedVars).
func parseEntry(name string, raw any, fileDesc string, vars map[string]string, opts Options) (s Server, skip string, err error) {
	e, ok := raw.(map[string]any)
	if !ok {
		return s, "", fmt.Errorf("entry must be an object, got %s", kind(raw))
	}
	if skip, err := skipReason(e); skip != "" || err != nil {
		return s, skip, err
	}
	s = Server{Name: name, Description: fileDesc}
	if d, ok := e["description"].(string); ok && d != "" {
		s.Description = d
	}
	x := expander{lookup: opts.Lookup, vars: vars, cwd: opts.Cwd}
	s.Cwd = x.expand(str(e["cwd"]))
	for _, k := range urlKeys {
		if s.URL = x.expand(str(e[k])); s.URL != "" {
			break
		}
	}
	if e, err = x.command(&s, e); err != nil {
		return s, "", err
	}
	if err := x.maps(&s, e, opts); err != nil {
		return s, "", err
	}
	if s.Tenants, err = stringList(e, "tenants"); err != nil {
		return s, "", err
	}
	if s.Approve, err = approveOf(e); err != nil {
		return s, "", err
	}
	if s.Transport, err = transportOf(e, s); err != nil {
		return s, "", err
	}
	if err := x.unresolved(); err != nil {
		return s, "", err
	}
	if !opts.AllowSelf && (looksLikeSelf(s) || startsSelf(s, opts)) {
		return s, "points at this bridge itself (set MCP_BRIDGE_ALLOW_SELF_SERVER=1 to allow)", nil
	}
	return s, "", nil
}

// skipReason says why an entry is left out on purpose ("" to keep it): a
// Zed extension's server, or one switched off.
func skipReason(e map[string]any) (string, error) {
	if src, _ := e["source"].(string); src == "extension" {
		return "a Zed extension's server (\"source\": \"extension\"), which only Zed can start", nil
	}
	disabled, err := switchOf(e, "disabled")
	if err != nil {
		return "", err
	}
	if disabled == "true" {
		return "disabled: true", nil
	}
	enabled, err := switchOf(e, "enabled") // OpenCode's and Codex's
	if err != nil {
		return "", err
	}
	if enabled == "false" {
		return "enabled: false", nil
	}
	return "", nil
}

// command sets s's program and arguments from the entry's "command" in
// any layout, and "args". Zed's command object moves its "args" and
// "env" into the entry it returns.
func (x *expander) command(s *Server, e map[string]any) (map[string]any, error) {
	switch c := e["command"].(type) {
	case []any: // OpenCode: the program and its arguments in one list
		if len(c) == 0 {
			return e, errors.New("\"command\" is an empty list")
		}
		s.Command = x.expand(str(c[0]))
		for _, a := range c[1:] {
			s.Args = append(s.Args, x.expand(str(a)))
		}
	case map[string]any: // Zed's older layout: {"path", "args", "env"}
		path, ok := c["path"].(string)
		if !ok || path == "" {
			return e, fmt.Errorf("\"command\" is an object without a \"path\"; accepted: a string, a list, or Zed's {\"path\": …, \"args\": […], \"env\": {…}}")
		}
		s.Command = x.expand(path)
		var err error
		if e, err = zedCommand(e, c); err != nil {
			return e, err
		}
	default:
		s.Command = x.expand(str(c))
	}
	if args, ok := e["args"].([]any); ok {
		for _, a := range args {
			s.Args = append(s.Args, x.expand(str(a)))
		}
	} else if e["args"] != nil {
		return e, fmt.Errorf("\"args\" must be a list, got %s", kind(e["args"]))
	}
	return e, nil
}

// maps sets s's environment (from "env", OpenCode's "environment" and an
// env file) and HTTP headers.
func (x *expander) maps(s *Server, e map[string]any, opts Options) error {
	var err error
	if s.Env, err = stringMap(e, "env", x); err != nil {
		return err
	}
	if s.Env == nil { // OpenCode calls it "environment"
		if s.Env, err = stringMap(e, "environment", x); err != nil {
			return err
		}
	}
	if s.Env, err = envFile(e, s.Env, opts.Cwd, x); err != nil {
		return err
	}
	s.Headers, err = stringMap(e, "headers", x)
	return err
}

// unresolved reports the variables the expansions could not resolve.
func (x *expander) unresolved() error {
	if len(x.missing) > 0 {
		return fmt.Errorf("undefined variable(s) %s; set them in the environment or remove the references", strings.Join(x.missing, ", "))
	}
	if len(x.inputs) > 0 {
		refs := make([]string, len(x.inputs))
		for i, id := range x.inputs {
			refs[i] = "${input:" + id + "}"
		}
		return fmt.Errorf("uses %s, which VS Code asks the user for and codeexec cannot; write the value in its place, or use ${env:NAME} and set NAME where codeexec starts", strings.Join(refs, ", "))
	}
	return nil
}

// zedCommand moves the "args" and "env" of Zed's command object into a
// copy of the entry, where the other layouts keep them; the entry's own,
// if it has them too, are refused as ambiguous.
func zedCommand(e, c map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(e)+2)
	for k, v := range e {
		out[k] = v
	}
	for _, k := range []string{"args", "env"} {
		if v, ok := c[k]; ok {
			if _, dup := e[k]; dup {
				return nil, fmt.Errorf("%q is given both in \"command\" and beside it; keep one", k)
			}
			out[k] = v
		}
	}
	return out, nil
}

// urlKeys name a remote server's URL, the first present wins: "url",
// Windsurf's "serverUrl" and Gemini CLI's "httpUrl".
var urlKeys = []string{"url", "serverUrl", "httpUrl"}

// switchOf reads an on/off field: "true" or "false", or "" when it is
// absent or null. The strings "true" and "false" (any case) count as the
// booleans, since what the user meant is plain; anything else is an error,
// so that a value the bridge cannot read never starts a server the user
// meant to turn off.
func switchOf(e map[string]any, key string) (string, error) {
	switch v := e[key].(type) {
	case nil:
		return "", nil
	case bool:
		return strconv.FormatBool(v), nil
	case string:
		if t := strings.ToLower(strings.TrimSpace(v)); t == "true" || t == "false" {
			return t, nil
		}
		return "", fmt.Errorf("%q is the string %q; accepted: true or false (the strings \"true\" and \"false\" too), so the entry is not loaded", key, v)
	}
	return "", fmt.Errorf("%q is %s (%s); accepted: true or false (the strings \"true\" and \"false\" too), so the entry is not loaded", key, kind(e[key]), str(e[key]))
}

// transportOf picks the transport from "type", else from which of
// "command" and "url" is present.
func transportOf(e map[string]any, s Server) (Transport, error) {
	t := strings.ToLower(str(e["type"]))
	if t == "" {
		t = strings.ToLower(str(e["transport"]))
	}
	switch t {
	case "":
		switch {
		case s.Command != "":
			return TransportStdio, nil
		case s.URL != "":
			return TransportHTTP, nil
		}
		return "", fmt.Errorf("entry has neither \"command\" (stdio) nor \"url\" (HTTP/SSE; Windsurf's \"serverUrl\" and Gemini's \"httpUrl\" count too)")
	case "stdio", "local": // "local" and "remote" are OpenCode's
		if s.Command == "" {
			return "", fmt.Errorf("stdio entry needs a \"command\"")
		}
		return TransportStdio, nil
	case "http", "streamable-http", "streamablehttp", "streamable_http", "remote":
		if s.URL == "" {
			return "", fmt.Errorf("%s entry needs a \"url\" (or \"serverUrl\", \"httpUrl\")", t)
		}
		return TransportHTTP, nil
	case "sse":
		if s.URL == "" {
			return "", fmt.Errorf("sse entry needs a \"url\" (or \"serverUrl\", \"httpUrl\")")
		}
		return TransportSSE, nil
	}
	return "", fmt.Errorf("unknown \"type\" %q; accepted: stdio, http, streamable-http, sse (and OpenCode's local, remote)", t)
}

func stringMap(e map[string]any, key string, x *expander) (map[string]string, error) {
	raw, ok := e[key]
	if !ok || raw == nil {
		return nil, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%q must be an object of strings, got %s", key, kind(raw))
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = x.expand(str(v))
	}
	return out, nil
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
