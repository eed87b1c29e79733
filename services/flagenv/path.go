package flagenv

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Path defines a flag that names a file or directory on this host, empty
// (off) by default. Its value, from the environment or the command line,
// is made absolute once, as it is read (AbsPath, with the environment's
// HOME): "~/x" set in a client's JSON config, which no shell reads, or
// given as --flag=~/x, which a shell leaves alone, is under HOME, and a
// relative path does not depend on what reads it later. An empty value
// stays empty.
func (s *Set) Path(p *string, name, u string, envs ...string) {
	home := s.getenv("HOME")
	*p = ""
	if n, v := s.env(envs); v != "" {
		abs, err := AbsPath(v, home, n, fmt.Sprintf("set %s (--%s) to an absolute path", n, name))
		if err != nil {
			s.errs = append(s.errs, err)
		} else {
			*p = abs
		}
	}
	s.Var(&pathValue{p: p, home: home}, name, usage(u, envs))
}

// pathValue is a Path flag's value.
type pathValue struct {
	p    *string
	home string
}

func (v *pathValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v *pathValue) Set(s string) error {
	if s == "" {
		*v.p = ""
		return nil
	}
	abs, err := AbsPath(s, v.home, "path", "give an absolute path")
	if err != nil {
		return err
	}
	*v.p = abs
	return nil
}

// ExpandHome turns a leading "~" or "~/" of the path p into home, as a
// shell would have for a value set in a JSON client config, which no shell
// reads. Without a home, and for "~user", p is returned as it is.
func ExpandHome(p, home string) string {
	if home != "" && (p == "~" || strings.HasPrefix(p, "~/")) {
		return filepath.Join(home, strings.TrimPrefix(p, "~"))
	}
	return p
}

// AbsPath is p with a leading ~ expanded with home (ExpandHome), made
// absolute against the working directory. A p that still starts with ~
// is refused rather than taken as a relative path: without a home, and
// for "~user", which only a shell expands. what names the path for an
// error, and fix says how to give another.
func AbsPath(p, home, what, fix string) (string, error) {
	p = ExpandHome(p, home)
	if strings.HasPrefix(p, "~") {
		if p == "~" || strings.HasPrefix(p, "~/") {
			return "", fmt.Errorf("%s %s starts with ~ and HOME is not set: %s, or set HOME", what, p, fix)
		}
		return "", fmt.Errorf("%s %s starts with ~user, which codeexec does not expand (only ~ and ~/, to HOME): %s", what, p, fix)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, p, err)
	}
	return abs, nil
}
