package config

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// envFile reads the entry's "envFile" (VS Code's: a .env file of
// variables for a stdio server) and returns env with the file's
// variables under it: a variable that "env" sets keeps that value, as in
// VS Code. A relative path is taken from the workspace (predefinedVars'
// workspaceFolder, else cwd). A file that
// cannot be read or parsed refuses the entry, so that the server never
// starts without the secrets the user put there.
func envFile(e map[string]any, env map[string]string, cwd string, x *expander) (map[string]string, error) {
	raw, ok := e["envFile"]
	if !ok || raw == nil {
		return env, nil
	}
	p, ok := raw.(string)
	if !ok {
		return nil, fmt.Errorf("\"envFile\" must be a string (the path of a .env file), got %s", kind(raw))
	}
	if p = x.expand(p); len(x.missing) > 0 || p == "" {
		return env, nil // reported with the other undefined variables
	}
	if ws := x.vars["workspaceFolder"]; ws != "" {
		cwd = ws
	}
	if !filepath.IsAbs(p) && cwd != "" {
		p = filepath.Join(cwd, p)
	}
	data, err := os.ReadFile(p) //nolint:gosec // the user's own config names the file, as it names the command to run
	if err != nil {
		return nil, fmt.Errorf("\"envFile\" %s cannot be read (%w); fix the path or remove \"envFile\"", p, err)
	}
	vars, err := parseDotenv(data)
	if err != nil {
		return nil, fmt.Errorf("\"envFile\" %s: %w; accepted: lines of NAME=value, # comments, values in quotes", p, err)
	}
	for k, v := range env {
		vars[k] = v
	}
	return vars, nil
}

// parseDotenv reads a .env file as VS Code and dotenv do: NAME=value
// lines, an optional "export " before the name, # comments and blank
// lines; a value in double quotes may span lines and holds \n escapes, one
// in single quotes is taken as written, and an unquoted one ends at " #".
func parseDotenv(data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		text = strings.TrimPrefix(text, "export ")
		name, value, ok := strings.Cut(text, "=")
		name = strings.TrimSpace(name)
		if !ok || !validEnvName.MatchString(name) {
			return nil, fmt.Errorf("line %d is not NAME=value", line)
		}
		value = strings.TrimSpace(value)
		switch {
		case strings.HasPrefix(value, `"`):
			start := line
			for !closedQuote(value) {
				if !sc.Scan() {
					return nil, fmt.Errorf("the quote opened on line %d is not closed", start)
				}
				line++
				value += "\n" + sc.Text()
			}
			end := strings.LastIndexByte(value, '"')
			s, err := strconv.Unquote(strings.ReplaceAll(value[:end+1], "\n", `\n`))
			if err != nil {
				s = value[1:end]
			}
			value = s
		case strings.HasPrefix(value, "'") && len(value) > 1 && strings.Contains(value[1:], "'"):
			value = value[1 : 1+strings.IndexByte(value[1:], '\'')]
		default:
			if i := strings.Index(value, " #"); i >= 0 {
				value = strings.TrimSpace(value[:i])
			}
		}
		out[name] = value
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// closedQuote reports whether a value that opens with a double quote has
// its closing one: a quote not escaped by a backslash.
func closedQuote(v string) bool {
	for i := 1; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '"':
			return true
		}
	}
	return false
}
