package toon

import (
	"strings"
	"testing"
)

// FuzzEncode encodes arbitrary strings as a field value and as an array
// item. The result must keep one line per field (no raw line break gets
// through), and a quoted value must unquote to the input.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"plain", "", " padded ", "a,b", "true", "-1", "007", "line\nbreak", `q"uote\`, "tab\tx", "é ✓"} {
		f.Add("key", s)
	}
	f.Add("odd key:", "v")
	f.Fuzz(func(t *testing.T, key, value string) {
		out, err := Encode([]Field{{Key: key, Value: value}, {Key: "list", Value: []string{value, value}}, {Key: "n", Value: 3}})
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(out, "\n")
		if len(lines) != 3 {
			t.Fatalf("three fields gave %d lines: %q", len(lines), out)
		}
		enc := encodeString(value)
		if got := unquote(t, enc); got != value {
			t.Errorf("encodeString(%q) = %s, which reads back as %q", value, enc, got)
		}
		if !strings.HasSuffix(lines[0], ": "+enc) || lines[1] != "list[2]: "+enc+","+enc {
			t.Errorf("lines %q", lines[:2])
		}
	})
}

// unquote reads back a TOON string value as a decoder would.
func unquote(t *testing.T, s string) string {
	if !strings.HasPrefix(s, `"`) {
		return s
	}
	if len(s) < 2 || !strings.HasSuffix(s, `"`) {
		t.Fatalf("unterminated quoted string %s", s)
	}
	var b strings.Builder
	in := s[1 : len(s)-1]
	for i := 0; i < len(in); i++ {
		c := in[i]
		if c == '"' {
			t.Fatalf("unescaped quote inside %s", s)
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(in) {
			t.Fatalf("dangling backslash in %s", s)
		}
		switch in[i] {
		case '\\', '"':
			b.WriteByte(in[i])
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		default:
			t.Fatalf("escape \\%c is not one of TOON's in %s", in[i], s)
		}
	}
	return b.String()
}
