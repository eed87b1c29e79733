package upstream

import (
	"sort"
	"strings"
)

// defaultEnvPOSIX and defaultEnvWindows name the variables a stdio server
// inherits from discoveryd's environment. They follow the MCP SDKs'
// get_default_environment (HOME, LOGNAME, PATH, SHELL, TERM, USER), plus the
// locale and temp-dir variables that servers need to print text and write
// scratch files. Everything else, secrets included, stays behind unless the
// server's config sets it in "env".
var (
	defaultEnvPOSIX   = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"}
	defaultEnvWindows = []string{"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT", "PROCESSOR_ARCHITECTURE", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP", "USERNAME", "USERPROFILE", "COMSPEC"}
)

// DefaultEnv picks the inherited variables for goos from lookup (os.LookupEnv
// in cmd/). Values that start with "()" are bash exported functions, which
// the SDKs also drop.
func DefaultEnv(goos string, lookup func(string) (string, bool)) map[string]string {
	names := defaultEnvPOSIX
	if goos == "windows" {
		names = defaultEnvWindows
	}
	out := map[string]string{}
	for _, n := range names {
		if v, ok := lookup(n); ok && !strings.HasPrefix(v, "()") {
			out[n] = v
		}
	}
	return out
}

// mergeEnv returns base overlaid with extra as a sorted KEY=VALUE list.
func mergeEnv(base, extra map[string]string) []string {
	m := make(map[string]string, len(base)+len(extra))
	for k, v := range base {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
