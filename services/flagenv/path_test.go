package flagenv

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPath reads a path setting from the environment and from the
// command line, as a client's JSON config and a shell that leaves
// --flag=~/x alone give it: ~ is HOME, a relative path is under the
// working directory, and a ~ that needs a HOME there is not is refused,
// naming the setting to change.
func TestPath(t *testing.T) {
	t.Parallel()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		// want is the path; fail, when set, what the error must say.
		want, fail string
	}{
		{"unset", map[string]string{"HOME": "/h"}, nil, "", ""},
		{"env tilde", map[string]string{"HOME": "/h", "CODEEXEC_X_FILE": "~/x"}, nil, "/h/x", ""},
		{"env home itself", map[string]string{"HOME": "/h", "CODEEXEC_X_FILE": "~"}, nil, "/h", ""},
		{"env relative", map[string]string{"HOME": "/h", "CODEEXEC_X_FILE": "d/x"}, nil, filepath.Join(cwd, "d/x"), ""},
		{"env absolute", map[string]string{"CODEEXEC_X_FILE": "/etc/x"}, nil, "/etc/x", ""},
		{"flag tilde", map[string]string{"HOME": "/h"}, []string{"--x-file=~/x"}, "/h/x", ""},
		{"flag relative", nil, []string{"--x-file", "x"}, filepath.Join(cwd, "x"), ""},
		{"flag over env", map[string]string{"HOME": "/h", "CODEEXEC_X_FILE": "~/env"}, []string{"--x-file=~/flag"}, "/h/flag", ""},
		{"flag empties it", map[string]string{"HOME": "/h", "CODEEXEC_X_FILE": "~/env"}, []string{"--x-file="}, "", ""},
		{"env without home", map[string]string{"CODEEXEC_X_FILE": "~/x"}, nil, "",
			"CODEEXEC_X_FILE ~/x starts with ~ and HOME is not set: set CODEEXEC_X_FILE (--x-file) to an absolute path, or set HOME"},
		{"flag without home", nil, []string{"--x-file=~/x"}, "",
			`invalid value "~/x" for flag -x-file: path ~/x starts with ~ and HOME is not set: give an absolute path, or set HOME`},
		{"tilde user", map[string]string{"HOME": "/h", "CODEEXEC_X_FILE": "~bob/x"}, nil, "",
			"CODEEXEC_X_FILE ~bob/x starts with ~user, which codeexec does not expand (only ~ and ~/, to HOME)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New("t", func(k string) string { return tc.env[k] })
			s.SetOutput(io.Discard)
			var p string
			s.Path(&p, "x-file", "a file", "CODEEXEC_X_FILE")
			err := s.Parse(tc.args)
			if err == nil {
				err = s.Err()
			}
			got := p
			if err != nil {
				got = err.Error()
			}
			if (err != nil) != (tc.fail != "") || (err == nil && got != tc.want) || !strings.Contains(got, tc.fail) {
				t.Errorf("Path gave %q; want %q or an error saying %q", got, tc.want, tc.fail)
			}
		})
	}
}
