package sessions

import (
	"regexp"
	"testing"
)

func TestHandleFor(t *testing.T) {
	t.Parallel()
	shape := regexp.MustCompile(`^[0-9a-f]{32}$`)
	const id = "mcp-session-0b7e2a52-6c1f-4c1e-9a35-3f2f4f3f0c11"
	// Every gateway, of this version or a later one, must compute this
	// very handle: another would lose every MCP session over HTTP.
	if got, want := HandleFor("alice", id), "b66726dc6ae783d4616e90058559267c"; got != want {
		t.Errorf("HandleFor(alice, %s) = %s, want %s", id, got, want)
	}
	seen := map[string]string{}
	for _, tc := range []struct{ tenant, id string }{
		{"alice", id}, {"bob", id}, {"alice", id + "x"},
		{"a", "bc"}, {"ab", "c"}, {"default", ""},
	} {
		h := HandleFor(tc.tenant, tc.id)
		if !shape.MatchString(h) {
			t.Errorf("HandleFor(%q, %q) = %q, not in the form of a handle", tc.tenant, tc.id, h)
		}
		if other, ok := seen[h]; ok {
			t.Errorf("HandleFor(%q, %q) = %q, as for %s", tc.tenant, tc.id, h, other)
		}
		seen[h] = tc.tenant + "/" + tc.id
	}
}
