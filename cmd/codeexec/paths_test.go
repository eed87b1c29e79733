package main

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// pathSettings are the flags that name a file or directory on this host,
// made absolute as they are read (flagenv.Path). --state-dir and --db are
// resolved later, once it is known whether they are needed (memdb's
// TestResolve), and memoryd copy's --from and --to only when they are
// not URLs; --python is an interpreter inside the sandbox.
var pathSettings = []string{"agent-root", "env-dir", "grpc-tls-ca", "grpc-tls-cert", "grpc-tls-key", "request-state-key-file", "servers-config", "store-password-file", "tokens-file"}

// TestPathSettingsAreUnderHome sets every path setting of every command
// to a path under ~ through its environment variable, as a client's JSON
// config does (no shell expands it), with HOME=/h, and reads what the
// setting became from the command's -h: /h/NAME, where it stayed ~/NAME
// before. A flag whose name says it takes a path must be one of them.
func TestPathSettingsAreUnderHome(t *testing.T) {
	t.Parallel()
	looksLikePath := regexp.MustCompile(`-(file|dir|root|config|cert|key|ca)$`)
	for _, args := range [][]string{{"serve"}, {"gateway"}, {"sandboxd"}, {"discoveryd"}, {"memoryd"}, {"memoryd", "backup"}, {"memoryd", "copy"}, {"import-upstream"}, {"health"}} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"HOME": "/h"}
			for name, f := range helpFlags(t, args, noEnv) {
				switch {
				case slices.Contains(pathSettings, name) && f.env == "":
					t.Errorf("-h names no environment variable for --%s", name)
				case slices.Contains(pathSettings, name):
					env[f.env] = "~/" + name
				case looksLikePath.MatchString(name) && name != "state-dir":
					t.Errorf("--%s looks like a path, but is not in pathSettings: bind it with flagenv.Path and list it, or say here why not", name)
				}
			}
			if len(env) == 1 {
				t.Fatalf("%v -h lists none of pathSettings", args)
			}
			for name, f := range helpFlags(t, args, func(k string) string { return env[k] }) {
				if slices.Contains(pathSettings, name) && f.def != "/h/"+name {
					t.Errorf("%s=~/%s gave --%s the value %q, want /h/%s", f.env, name, name, f.def, name)
				}
			}
		})
	}
}

// helpFlag is what a command's -h says of a flag.
type helpFlag struct{ env, def string }

var (
	helpEnv     = regexp.MustCompile(`\(env ([A-Z0-9_]+)`)
	helpDefault = regexp.MustCompile(`\(default "?(.*?)"?\)$`)
)

// helpFlags runs the command's -h with getenv and reads each flag's
// first environment variable and its default, the value it has from
// the environment.
func helpFlags(t *testing.T, args []string, getenv func(string) string) map[string]helpFlag {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), append(slices.Clone(args), "-h"), getenv, nil, &stdout, &stderr); err != nil {
		t.Fatalf("%v -h = %v: %s", args, err, stderr.String())
	}
	flags := map[string]helpFlag{}
	for _, block := range strings.Split(stdout.String(), "\n  -")[1:] {
		name, text, _ := strings.Cut(block, "\n")
		name, _, _ = strings.Cut(name, " ")
		var f helpFlag
		if m := helpEnv.FindStringSubmatch(text); m != nil {
			f.env = m[1]
		}
		if m := helpDefault.FindStringSubmatch(strings.TrimSpace(text)); m != nil {
			f.def = m[1]
		}
		flags[name] = f
	}
	return flags
}
