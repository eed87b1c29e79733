package config

import (
	"cmp"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// varRef matches the references the clients' configs hold: ${VAR} and
// ${env:VAR} (VS Code, Cursor), ${VAR:-default} (Claude Code's .mcp.json:
// the default when VAR is unset or empty), ${input:ID} (a VS Code input,
// which VS Code prompts for) and VS Code's and Cursor's predefined
// variables such as ${workspaceFolder} and ${/}.
var varRef = regexp.MustCompile(`\$\{(?:(env:|input:)?([A-Za-z_][A-Za-z0-9_.-]*)(?::-([^}]*))?|(/))\}`)

// expander replaces variable references and remembers the ones that are
// not defined, so that the entry can be reported instead of started with a
// silently empty token.
type expander struct {
	lookup func(string) (string, bool)
	// vars are the predefined variables of VS Code and Cursor
	// (predefinedVars), which no environment variable overrides, as in
	// those clients.
	vars map[string]string
	// cwd answers ${PWD} when the environment has no PWD: a client that
	// starts the bridge without a shell passes none, and the directory
	// it started it in is what the config's author meant.
	cwd     string
	missing []string
	// inputs are the ${input:ID} references met, which the bridge cannot
	// answer: the client prompts the user for them.
	inputs []string
}

func (x *expander) expand(s string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		prefix, name, def := m[1], m[2], m[3]
		if m[4] != "" {
			name = m[4]
		}
		if prefix == "input:" {
			if !slices.Contains(x.inputs, name) {
				x.inputs = append(x.inputs, name)
			}
			return ref
		}
		if v, ok := x.vars[name]; ok && prefix == "" {
			return v
		}
		if !validEnvName.MatchString(name) {
			return ref // not a reference we know, e.g. ${config:x}
		}
		hasDefault := strings.Contains(ref, ":-")
		if x.lookup != nil {
			if v, ok := x.lookup(name); ok && (v != "" || !hasDefault) {
				return v
			}
		}
		if name == "PWD" && x.cwd != "" {
			return x.cwd
		}
		if hasDefault {
			return def
		}
		if !slices.Contains(x.missing, name) {
			x.missing = append(x.missing, name)
		}
		return ""
	})
}

// validEnvName is what an environment variable's name may be.
var validEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// predefinedVars are the variables that VS Code and Cursor substitute in
// their mcp.json, for the workspace the bridge runs in: the folder that
// holds the file's .vscode or .cursor directory, else (for a user-wide
// file such as ~/.cursor/mcp.json) cwd.
func predefinedVars(path, cwd, home string) map[string]string {
	ws := cwd
	if d := filepath.Dir(path); (filepath.Base(d) == ".vscode" || filepath.Base(d) == ".cursor") && filepath.Dir(d) != filepath.Clean(home) {
		ws = filepath.Dir(d)
	}
	vars := map[string]string{"pathSeparator": string(filepath.Separator), "/": string(filepath.Separator)}
	if ws != "" {
		vars["workspaceFolder"] = ws
		vars["workspaceFolderBasename"] = filepath.Base(ws)
		vars["workspaceRoot"] = ws // VS Code's older name
	}
	if home != "" {
		vars["userHome"] = home
	}
	return vars
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

// startsSelf reports whether an entry runs the file opts.Self under
// another name: its command as exec finds it (a bare name on the PATH
// that codeexec runs with, a relative path from the entry's cwd), or an
// argument that is a path (`env /home/u/bin/ce serve`). Symlinks are
// followed, so a link to the binary and the binary are one file.
func startsSelf(s Server, opts Options) bool {
	if opts.Self == "" || s.Command == "" {
		return false
	}
	self, err := os.Stat(opts.Self)
	if err != nil {
		return false
	}
	same := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && os.SameFile(fi, self)
	}
	dir := cmp.Or(s.Cwd, opts.Cwd)
	for _, a := range s.Args {
		if strings.ContainsRune(a, filepath.Separator) && same(fromDir(dir, a)) {
			return true
		}
	}
	if strings.ContainsRune(s.Command, filepath.Separator) {
		return same(fromDir(dir, s.Command))
	}
	path := ""
	if opts.Lookup != nil {
		path, _ = opts.Lookup("PATH")
	}
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(cmp.Or(d, "."), s.Command)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			// exec runs the first executable file of that name.
			return os.SameFile(fi, self)
		}
	}
	return false
}

// fromDir is p taken from dir when it is relative.
func fromDir(dir, p string) string {
	if filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}
