package flagenv

import "strings"

// Strings defines a repeatable flag: each use adds one value. The
// environment gives the values separated by commas; flags given on the
// command line replace them.
func (s *Set) Strings(p *[]string, name, u string, envs ...string) {
	if _, v := s.env(envs); v != "" {
		*p = splitList(v)
	}
	s.Var(&listValue{p: p}, name, usage(u+"; repeatable", envs))
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// listValue is a repeatable flag; its first use drops the environment's
// values.
type listValue struct {
	p   *[]string
	set bool
}

func (l *listValue) String() string {
	if l == nil || l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l *listValue) Set(v string) error {
	if !l.set {
		*l.p, l.set = nil, true
	}
	*l.p = append(*l.p, strings.TrimSpace(v))
	return nil
}
