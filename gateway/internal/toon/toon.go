// Package toon encodes flat records as TOON (Token-Oriented Object Notation,
// https://github.com/toon-format/spec), the compact text format that upstream
// offers as MCP_BRIDGE_OUTPUT_MODE=toon.
//
// Only the subset that run_python results need is implemented: one object
// whose fields are strings, integers, booleans or arrays of strings, encoded
// with the spec's default options (comma delimiter, no key folding). No Go
// TOON module was available in the vetted package lists, and this subset is
// small enough that a dependency would cost more than it saves.
package toon

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Field is one key of an object, in the order it is to be written.
type Field struct {
	// Key is the object key.
	Key string
	// Value is a string, an int, an int64, a bool or a []string.
	Value any
}

// Encode renders fields as a TOON object, one line per field, without a
// trailing newline. It returns an error only for value types it does not
// support, which is a bug in the caller.
func Encode(fields []Field) (string, error) {
	var b strings.Builder
	for i, f := range fields {
		if i > 0 {
			b.WriteByte('\n')
		}
		key := encodeKey(f.Key)
		switch v := f.Value.(type) {
		case string:
			b.WriteString(key + ": " + encodeString(v))
		case int:
			b.WriteString(key + ": " + strconv.Itoa(v))
		case int64:
			b.WriteString(key + ": " + strconv.FormatInt(v, 10))
		case float64:
			// TOON numbers are JSON's: 2.5, and 30 for a whole number.
			b.WriteString(key + ": " + strconv.FormatFloat(v, 'f', -1, 64))
		case bool:
			b.WriteString(key + ": " + strconv.FormatBool(v))
		case []string:
			// Primitive arrays are inline: key[N]: a,b,c, and an empty one
			// is key[0]: with nothing after the colon.
			fmt.Fprintf(&b, "%s[%d]:", key, len(v))
			for j, s := range v {
				if j == 0 {
					b.WriteByte(' ')
				} else {
					b.WriteByte(',')
				}
				b.WriteString(encodeString(s))
			}
		default:
			return "", fmt.Errorf("toon: field %q has unsupported type %T", f.Key, f.Value)
		}
	}
	return b.String(), nil
}

var (
	unquotedKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)
	numericLike = regexp.MustCompile(`(?i)^-?\d+(?:\.\d+)?(?:e[+-]?\d+)?$`)
	leadingZero = regexp.MustCompile(`^0\d+$`)
)

// encodeKey quotes a key unless it is a plain identifier (spec §7.3).
func encodeKey(k string) string {
	if unquotedKey.MatchString(k) {
		return k
	}
	return quote(k)
}

// encodeString quotes s when a decoder could misread it (spec §7.2). The
// comma is both the document and the array delimiter here, so one rule
// covers object values and array items.
func encodeString(s string) string {
	if needsQuotes(s) {
		return quote(s)
	}
	return s
}

func needsQuotes(s string) bool {
	switch {
	case s == "":
		return true
	case strings.TrimSpace(s) != s:
		return true
	case s == "true" || s == "false" || s == "null":
		return true
	case numericLike.MatchString(s) || leadingZero.MatchString(s):
		return true
	case strings.HasPrefix(s, "-"):
		return true
	case strings.ContainsAny(s, ":\"\\[]{}\n\r\t,"):
		return true
	}
	return false
}

// quote wraps s in double quotes with the five escapes the spec allows
// (§7.1). Other control characters pass through unchanged, as the spec
// defines no escape for them. It works on bytes, not runes, so that bytes
// that are not UTF-8 pass through as they are instead of turning into
// U+FFFD.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := range len(s) {
		switch r := s[i]; r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteByte(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
