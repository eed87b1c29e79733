package main

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestHelpListsOnlyTheFlagsACommandUses asks every command for -h and
// compares the flags it lists with the settings the command really reads:
// a target alone offers its own settings plus where it finds the others,
// and serve every target's settings but none of the wiring between them.
func TestHelpListsOnlyTheFlagsACommandUses(t *testing.T) {
	t.Parallel()
	var (
		logging   = []string{"log-level", "log-format", "otlp-endpoint"}
		tls       = []string{"grpc-tls-ca", "grpc-tls-cert", "grpc-tls-key"}
		grpcAlone = join(logging, tls, []string{"listen", "metrics"})
		database  = []string{"state-dir", "db", "store", "store-password-file", "store-wait"}
		memory    = join(database, []string{"owner-wait", "max-value", "quota-memory-keys", "quota-memory-bytes", "quota-checkpoint-bytes"})
		discovery = []string{"servers-config", "allow-self-server", "tool-timeout", "search-index-wait", "search-model", "server-start-timeout", "approve", "tool-calls-per-minute"}
		sandbox   = []string{"runtime", "env", "env-dir", "python", "memory", "pids", "cpus", "cpu-time", "tmp-size", "workspace-size", "file-size", "open-files", "output-limit", "mount", "tenant-mount", "output-budget", "workspace-checkpoint-bytes", "image-side", "image-bytes", "call-image-bytes", "call-images",
			"idle-timeout", "pool", "launch-spares", "fork-server", "max-sessions", "image", "container-user", "container-uids", "runtime-args", "runtime-arg",
			"agent-root", "runtime-idle-timeout", "session-ttl", "checkpoint-bytes", "tool-errors", "sandbox-uid"}
		mcp  = []string{"timeout", "max-timeout", "yield", "output-mode", "tenant", "max-tool-calls", "tenant-max-tool-calls", "tenant-max-timeout", "tools", "request-state-key-file"}
		http = []string{"http", "tokens-file", "jwt-issuer", "jwks-url", "jwt-audience", "jwt-tenant-claim", "resource-url",
			"insecure-no-auth", "allowed-hosts", "allowed-origins", "metrics-tenants", "quota-sessions", "quota-execs",
			"quota-execs-per-minute", "shutdown-grace", "http-max-inflight", "http-tenant-inflight", "http-body-timeout", "http-idle-timeout", "http-write-timeout"}
		suite = join(logging, memory, discovery, sandbox, mcp, http)
	)
	for _, tc := range []struct {
		args  []string
		flags []string
	}{
		{[]string{"serve"}, suite},
		{[]string{"run"}, suite},
		{[]string{"memoryd"}, join(grpcAlone, memory)},
		{[]string{"discoveryd"}, join(grpcAlone, discovery, []string{"memory-addr"})},
		{[]string{"sandboxd"}, join(grpcAlone, sandbox, []string{"timeout", "max-timeout", "shutdown-grace", "discovery", "memory-addr", "advertise"})},
		{[]string{"gateway"}, join(logging, tls, mcp, http, []string{"output-limit", "idle-timeout", "sandbox", "balance", "discovery"})},
		{[]string{"memoryd", "backup"}, join(database, tls, []string{"memory"})},
		{[]string{"memoryd", "copy"}, []string{"from", "to", "store-password-file", "replace", "store-wait"}},
		{[]string{"import-upstream"}, join(memory, tls, []string{"memory", "tenant"})},
		{[]string{"health"}, tls},
		{[]string{"bench"}, []string{"python", "spawns", "warm", "fresh", "fresh-gap", "sessions", "execs", "burst", "first-sessions", "idle-sessions", "runtimes", "image", "idle", "env"}},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if err := run(t.Context(), append(tc.args, "-h"), noEnv, nil, &stdout, &stderr); err != nil {
				t.Fatalf("%v -h = %v, want the help", tc.args, err)
			}
			if diff := cmp.Diff(sorted(tc.flags), listedFlags(stdout.String())); diff != "" {
				t.Errorf("%v -h lists other flags than the command uses (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

var flagLine = regexp.MustCompile(`(?m)^  -([a-z-]+)`)

// listedFlags are the flag names in a flag set's help, sorted.
func listedFlags(help string) []string {
	var names []string
	for _, m := range flagLine.FindAllStringSubmatch(help, -1) {
		names = append(names, m[1])
	}
	return sorted(names)
}

func join(lists ...[]string) []string { return slices.Concat(lists...) }

func sorted(names []string) []string {
	names = slices.Clone(names)
	slices.Sort(names)
	return slices.Compact(names)
}
