package pysplit

import (
	"strings"
	"testing"
)

// FuzzSplit cuts arbitrary text. It must not panic, and what it returns
// must be pieces of the input, in order: every function's source (less the
// newline Split adds) appears in the input at its line, names are
// identifiers, and lines only grow.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{
		"def f(x):\n    return x\n",
		"import json\n\n# c\n@dec(\n  1)\ndef g():\n    '''doc'''\n\nclass C:\n    pass\n",
		"def h():\n    s = \"\"\"\ndef fake():\n\"\"\"\n",
		"x = [\n1,\n]\ndef \\\n k(): pass\n",
		"async def a(): pass\r\ndef b(): pass",
		"'''unterminated\ndef z(): pass\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		funcs, others := Split(src)
		lines := strings.SplitAfter(src, "\n")
		last := 0
		check := func(what string, line int, text string) {
			if line < 1 || line > len(lines) {
				t.Fatalf("%s at line %d of %d", what, line, len(lines))
			}
			if line < last {
				t.Errorf("%s at line %d comes before line %d", what, line, last)
			}
			last = line
			body := strings.TrimSuffix(text, "\n")
			rest := strings.Join(lines[line-1:], "")
			if !strings.HasPrefix(rest, body) {
				t.Errorf("%s %q is not the input at line %d", what, body, line)
			}
		}
		for _, fn := range funcs {
			if fn.Name == "" || strings.ContainsAny(fn.Name, " \t(\n") {
				t.Errorf("function name %q", fn.Name)
			}
			check("function "+fn.Name, fn.Line, fn.Source)
		}
		last = 0
		for _, o := range others {
			check("statement", o.Line, o.Source)
		}
	})
}
