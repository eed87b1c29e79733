package approval

import (
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func tool(name string, readOnly, destructive *bool) mcp.Tool {
	return mcp.Tool{Name: name, Annotations: mcp.ToolAnnotation{ReadOnlyHint: readOnly, DestructiveHint: destructive}}
}

func TestReason(t *testing.T) {
	t.Parallel()
	yes, no := new(true), new(false)
	flags, err := ParseFlags([]string{"destructive", "git*.push_*"})
	if err != nil {
		t.Fatal(err)
	}
	entry := EntryRules("a[1]", "/cfg.json", []string{"send_*"})
	rules := slices.Concat(flags, entry)
	for _, tc := range []struct {
		server string
		tool   mcp.Tool
		want   string
	}{
		{"x", tool("read", yes, nil), ""},
		{"x", tool("read", yes, no), ""},
		{"x", tool("odd", yes, yes), "--approve destructive: destructiveHint is true"},
		{"x", tool("plain", nil, nil), "--approve destructive: readOnlyHint is not set"},
		{"x", tool("write", no, no), "--approve destructive: readOnlyHint is false"},
		{"github", tool("push_files", yes, nil), "--approve git*.push_*"},
		{"gitlab", tool("push", yes, nil), ""},
		// The entry's server name is a literal, not a glob.
		{"a[1]", tool("send_mail", yes, nil), `"approve": "send_*" in the entry of server "a[1]" (/cfg.json)`},
		{"a1", tool("send_mail", yes, nil), ""},
	} {
		if got := Reason(rules, tc.server, tc.tool); got != tc.want {
			t.Errorf("%s.%s: %q, want %q", tc.server, tc.tool.Name, got, tc.want)
		}
	}
}

func TestUnmatched(t *testing.T) {
	t.Parallel()
	rules, err := ParseFlags([]string{"a.x*", "a.nope", "b.*", "zz.*", "destructive"})
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string][]mcp.Tool{"a": {{Name: "xray"}}}
	got := Unmatched(rules, tools, []string{"b"})
	if len(got) != 2 || got[0].Source != "--approve a.nope" || got[1].Source != "--approve zz.*" {
		t.Errorf("Unmatched = %+v, want a.nope and zz.* (b.* is not judged: b did not list)", got)
	}
}
