package alias

import (
	"strings"
	"testing"
)

func TestAliases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		tool bool
		want string
	}{
		{"GitHub", false, "github"},
		{"my-server.v2", false, "my_server_v2"},
		{"9lives", false, "_9lives"},
		{"a--b  c", false, "a_b_c"},
		{"", false, "server"},
		{"get-sum", true, "get_sum"},
		{"Read File", true, "read_file"},
		{"import", true, "import_"},
		{"class", true, "class_"},
		{"None", true, "none"}, // lowercased first, so no longer a keyword
		{"3d-render", true, "_3d_render"},
	}
	for _, tc := range tests {
		f := Server
		if tc.tool {
			f = Tool
		}
		if got := f(tc.in); got != tc.want {
			t.Errorf("alias(%q, tool=%v) = %q, want %q", tc.in, tc.tool, got, tc.want)
		}
	}
	got := Tools([]string{"read-file", "read_file", "Read File", "x"})
	if strings.Join(got, ",") != "read_file,read_file_2,read_file_3,x" {
		t.Errorf("collisions = %v", got)
	}
}
