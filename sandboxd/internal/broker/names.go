package broker

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
)

// allowed checks the exec's allow-list: a server not loaded in the exec
// is one its code may not use.
func allowed(env *sandbox.ExecEnv, server string) error {
	if server == "" {
		return channel.Errorf(channel.CodeInvalidArgument, "missing server name")
	}
	if slices.Contains(env.Allowed, server) {
		return nil
	}
	// A name whose config entry was not loaded: servers=[...] would fail
	// too, so say what keeps it out, as run_python's error does.
	for _, u := range env.Unloaded {
		if u.Name == server {
			return channel.Errorf(channel.CodePermissionDenied, "Server %s is not available: its config entry in %s was not loaded: %s", pyRepr(server), u.Source, u.Reason)
		}
	}
	// Upstream's words first ("Server 'x' is not available"), then what to
	// do: the exact servers argument that loads it with the others.
	load := make([]string, 0, len(env.Allowed)+1)
	for _, n := range append(slices.Clone(env.Allowed), server) {
		load = append(load, quoted(n))
	}
	if len(env.Allowed) == 0 {
		return channel.Errorf(channel.CodePermissionDenied, "Server %s is not available: no servers are loaded in this call; pass servers=[%s] to run_python", pyRepr(server), load[0])
	}
	return channel.Errorf(channel.CodePermissionDenied, "Server %s is not available: it is not loaded in this call (loaded: %s); pass servers=[%s] to run_python",
		pyRepr(server), quoteList(env.Allowed), strings.Join(load, ", "))
}

// pyRepr quotes s as Python's repr() does, since upstream's messages
// name servers with {server!r}: single quotes unless s holds a single
// quote and no double quote.
func pyRepr(s string) string {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\' || r == rune(q):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == utf8.RuneError || strconv.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// Messages name at most this many unknown or configured servers, so that
// a call with thousands of names gets an error the model can read.
const (
	maxUnknownNamed    = 5
	maxConfiguredNamed = 20
)

// unknownServers says which requested servers do not exist: the first few
// and how many there are in all.
func unknownServers(names []string) string {
	if len(names) == 1 {
		return "unknown MCP server " + quoteList(names)
	}
	return fmt.Sprintf("%d unknown MCP servers: %s", len(names), someOf(names, maxUnknownNamed))
}

// whyUnloaded says, for each of the first few unknown names that a config
// entry holds, which file holds it and why it was not loaded (a variable
// not set, "disabled": true, …): the user added the server, and the fix
// is in that file, not in adding it again.
func whyUnloaded(unknown []string, unloaded []*discoveryv1.UnloadedServer) string {
	var b strings.Builder
	for _, name := range unknown[:min(len(unknown), maxUnknownNamed)] {
		for _, u := range unloaded {
			if u.GetName() == name {
				fmt.Fprintf(&b, "; %q in %s was not loaded: %s", name, u.GetSource(), u.GetReason())
			}
		}
	}
	return b.String()
}

// someOf quotes the first n names, then counts the rest.
func someOf(names []string, n int) string {
	if len(names) <= n {
		return quoteList(names)
	}
	return fmt.Sprintf("%s and %d more", quoteList(names[:n]), len(names)-n)
}

func configuredList(all []channel.DiscoveredServer) string {
	if len(all) == 0 {
		return "none (add servers to ~/MCPs/*.json, your MCP client config, or MCP_SERVERS_CONFIG)"
	}
	names := make([]string, len(all))
	for i, d := range all {
		names[i] = d.Name
	}
	sort.Strings(names)
	if len(names) > maxConfiguredNamed {
		return someOf(names, maxConfiguredNamed) + " (runtime.discovered_servers() lists them all)"
	}
	return quoteList(names)
}
