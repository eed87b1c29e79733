package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartsSelf: an entry that runs the file Options.Self under another
// name or path is this bridge; one that runs another file is not, even by
// the same name.
func TestStartsSelf(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	bin, other, cwd := filepath.Join(root, "bin"), filepath.Join(root, "other"), filepath.Join(root, "cwd")
	for _, d := range []string{bin, other, cwd} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string, mode os.FileMode) {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	self := filepath.Join(bin, "ce")
	write(self, 0o755)
	write(filepath.Join(other, "ce"), 0o755) // another file of the same name
	write(filepath.Join(other, "plain"), 0o644)
	write(filepath.Join(bin, "plain"), 0o755)
	if err := os.Symlink(self, filepath.Join(bin, "link")); err != nil {
		t.Fatal(err)
	}
	path := func(dirs ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			return strings.Join(dirs, string(os.PathListSeparator)), k == "PATH"
		}
	}
	tests := []struct {
		name string
		s    Server
		path []string
		want bool
	}{
		{"absolute path", Server{Command: self}, nil, true},
		{"symlink", Server{Command: filepath.Join(bin, "link"), Args: []string{"serve"}}, nil, true},
		{"bare name on PATH", Server{Command: "ce"}, []string{bin}, true},
		{"symlink's name on PATH", Server{Command: "link"}, []string{bin}, true},
		{"relative to the entry's cwd", Server{Command: "../bin/ce", Cwd: cwd}, nil, true},
		{"an argument", Server{Command: "env", Args: []string{"A=1", self, "serve"}}, []string{bin}, true},
		{"another file earlier on PATH", Server{Command: "ce"}, []string{other, bin}, false},
		{"a file that is not executable is passed over", Server{Command: "plain"}, []string{other, bin}, false},
		{"not on PATH", Server{Command: "ce"}, []string{other}, false},
		{"another file", Server{Command: filepath.Join(other, "ce")}, nil, false},
		{"no command", Server{URL: "http://x"}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := startsSelf(tc.s, Options{Self: self, Cwd: root, Lookup: path(tc.path...)}); got != tc.want {
				t.Errorf("startsSelf(%+v) with PATH %v = %v, want %v", tc.s, tc.path, got, tc.want)
			}
		})
	}
	if startsSelf(Server{Command: self}, Options{}) {
		t.Error("without Options.Self, an entry was taken for this bridge by its file")
	}
}
