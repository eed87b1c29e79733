// Package pysplit cuts a Python module into its top-level functions
// without running Python. It understands just enough of the language to
// find where each top-level statement starts: strings (including
// triple-quoted ones), comments, bracket nesting and backslash
// continuations. That is all upstream's user_tools.py needs, since it is a
// file of appended function sources.
package pysplit

import (
	"regexp"
	"strings"
)

// Func is one top-level function.
type Func struct {
	// Name is the function's name.
	Name string
	// Source is the function with its decorators and the comment lines
	// directly above it, ending in one newline.
	Source string
	// Doc is the docstring, cleaned like inspect.cleandoc, or "".
	Doc string
	// Line is the 1-based first line of Source.
	Line int
}

// Other is a top-level statement that is not a function.
type Other struct {
	// Import is true for `import` and `from … import` statements.
	Import bool
	// Source is the statement's text, ending in one newline.
	Source string
	// Line is its 1-based first line.
	Line int
}

var defRE = regexp.MustCompile(`^(?:async[ \t]+)?def[ \t]+([^\W\d]\w*)[ \t]*\(`)

// Split returns the top-level functions of src in order of appearance, and
// the other top-level statements. Decorators go with the def they decorate;
// comment lines directly above a statement go with it.
func Split(src string) ([]Func, []Other) {
	lines := strings.SplitAfter(src, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	starts := statementStarts(lines)
	var funcs []Func
	var others []Other
	prevEnd := 0
	groupStart := -1 // first line of pending decorators and comments
	for k, start := range starts {
		end := len(lines)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		// Trailing blank and comment lines belong to what follows.
		for end > start+1 && isBlankOrComment(lines[end-1]) {
			end--
		}
		first := start
		for first > prevEnd && isComment(lines[first-1]) {
			first--
		}
		if groupStart < 0 {
			groupStart = first
		}
		prevEnd = end
		head := lines[start]
		if strings.HasPrefix(head, "@") {
			continue // wait for the def
		}
		text := strings.TrimRight(strings.Join(lines[groupStart:end], ""), "\n") + "\n"
		if m := defRE.FindStringSubmatch(head); m != nil {
			funcs = append(funcs, Func{Name: m[1], Source: text, Doc: docstring(strings.Join(lines[start:end], "")), Line: groupStart + 1})
		} else {
			imp := strings.HasPrefix(head, "import ") || strings.HasPrefix(head, "from ")
			others = append(others, Other{Import: imp, Source: text, Line: groupStart + 1})
		}
		groupStart = -1
	}
	if groupStart >= 0 { // decorators at the end of the file
		others = append(others, Other{Source: strings.TrimRight(strings.Join(lines[groupStart:prevEnd], ""), "\n") + "\n", Line: groupStart + 1})
	}
	return funcs, others
}

// statementStarts lists the lines where a top-level statement begins: a
// line at column 0, outside any string, bracket or continuation, that is
// not blank and not a comment.
func statementStarts(lines []string) []int {
	var starts []int
	var sc scanner
	for i, line := range lines {
		if sc.atTopLevel() && !isBlankOrComment(line) && line[0] != ' ' && line[0] != '\t' {
			starts = append(starts, i)
		}
		sc.scanLine(line)
	}
	return starts
}

func isComment(line string) bool { return strings.HasPrefix(line, "#") }

func isBlankOrComment(line string) bool {
	t := strings.TrimSpace(line)
	return t == "" || strings.HasPrefix(t, "#")
}
