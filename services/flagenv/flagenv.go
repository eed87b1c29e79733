// Package flagenv fills flag sets from environment variables, so that every
// setting has one flag and the upstream MCP_BRIDGE_* names keep working.
// Durations accept Go syntax ("30s") and bare seconds ("30"); sizes accept
// "512m", "1g", "64k" and plain bytes; paths take a leading ~ as HOME and
// are made absolute (Path).
package flagenv

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Getenv looks up an environment variable.
type Getenv func(string) string

// Set is a flag set whose defaults come from the environment.
type Set struct {
	*flag.FlagSet
	getenv Getenv
	errs   []error
}

// New returns a Set.
func New(name string, getenv Getenv) *Set {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	return &Set{FlagSet: fs, getenv: getenv}
}

// Err reports environment values that could not be parsed, and the
// problems recorded with Fail.
func (s *Set) Err() error { return errors.Join(s.errs...) }

// Fail records a problem with a flag's value for Err to report. A
// flag.Value whose value may be secret (a URL with a password) calls it
// from Set instead of returning the error: the flag package's own message
// would repeat the value.
func (s *Set) Fail(err error) { s.errs = append(s.errs, err) }

func (s *Set) env(names []string) (string, string) {
	for _, n := range names {
		if v := strings.TrimSpace(s.getenv(n)); v != "" {
			return n, v
		}
	}
	return "", ""
}

func usage(u string, envs []string) string {
	if len(envs) == 0 {
		return u
	}
	return fmt.Sprintf("%s (env %s)", u, strings.Join(envs, ", "))
}

// String defines a string flag.
func (s *Set) String(p *string, name, def, u string, envs ...string) {
	s.StringVar(p, name, fromEnv(s, envs, def, func(v string) (string, error) { return v, nil }), usage(u, envs))
}

// fromEnv returns the value of the first of envs that is set, parsed, or
// def when none is set. A value that does not parse is recorded for Err and
// def is kept.
func fromEnv[T any](s *Set, envs []string, def T, parse func(string) (T, error)) T {
	n, v := s.env(envs)
	if v == "" {
		return def
	}
	x, err := parse(v)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s=%q: %w", n, v, err))
		return def
	}
	return x
}

// Int defines an int flag.
func (s *Set) Int(p *int, name string, def int, u string, envs ...string) {
	def = fromEnv(s, envs, def, func(v string) (int, error) {
		i, err := strconv.Atoi(v)
		if err != nil {
			return 0, errors.New("want a whole number")
		}
		return i, nil
	})
	s.IntVar(p, name, def, usage(u, envs))
}

// Float defines a float flag.
func (s *Set) Float(p *float64, name string, def float64, u string, envs ...string) {
	def = fromEnv(s, envs, def, func(v string) (float64, error) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, errors.New("want a number such as 0.5 or 2")
		}
		return f, nil
	})
	s.Float64Var(p, name, def, usage(u, envs))
}

// Bool defines a bool flag; the environment accepts 1/true/yes and 0/false/no.
func (s *Set) Bool(p *bool, name string, def bool, u string, envs ...string) {
	s.BoolVar(p, name, fromEnv(s, envs, def, ParseBool), usage(u, envs))
}

// Duration defines a duration flag that also takes bare seconds.
func (s *Set) Duration(p *time.Duration, name string, def time.Duration, u string, envs ...string) {
	*p = fromEnv(s, envs, def, ParseDuration)
	s.Var((*durationValue)(p), name, usage(u, envs))
}

// Bytes defines a size flag ("512m").
func (s *Set) Bytes(p *int64, name string, def int64, u string, envs ...string) {
	*p = fromEnv(s, envs, def, ParseBytes)
	s.Var((*bytesValue)(p), name, usage(u, envs))
}

// ParseBool accepts 1/true/yes/on and 0/false/no/off.
func ParseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off", "":
		return false, nil
	}
	return false, errors.New("want 1/true/yes or 0/false/no")
}

// ParseDuration accepts "30s", "1m30s" and bare seconds ("30", "2.5").
func ParseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f < 0 {
			return 0, errors.New("want a non-negative duration")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errors.New(`want a duration such as "30s", "2m" or bare seconds such as "30"`)
	}
	return d, nil
}

// ParseBytes accepts "512m", "1g", "64k", "1.5g", "512MiB" and plain bytes.
func ParseBytes(v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "ib"), "b")
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k':
			mult, s = 1<<10, s[:n-1]
		case 'm':
			mult, s = 1<<20, s[:n-1]
		case 'g':
			mult, s = 1<<30, s[:n-1]
		case 't':
			mult, s = 1<<40, s[:n-1]
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 {
		return 0, errors.New(`want a size such as "512m", "1g", "64k" or a number of bytes`)
	}
	return int64(f * float64(mult)), nil
}

type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }
func (d *durationValue) Set(v string) error {
	x, err := ParseDuration(v)
	if err != nil {
		return err
	}
	*d = durationValue(x)
	return nil
}

type bytesValue int64

func (b *bytesValue) String() string { return strconv.FormatInt(int64(*b), 10) }
func (b *bytesValue) Set(v string) error {
	x, err := ParseBytes(v)
	if err != nil {
		return err
	}
	*b = bytesValue(x)
	return nil
}
