package pysplit

import (
	"strings"
)

// scanner tracks, line by line, whether the next line starts inside a
// string, a bracket or a backslash continuation.
type scanner struct {
	quote     string // open string's delimiter: ', ", ''' or """; "" when none
	depth     int    // open brackets
	continued bool   // the previous line ended in a backslash
}

func (s *scanner) atTopLevel() bool {
	return s.quote == "" && s.depth == 0 && !s.continued
}

// scanLine advances over one line, newline included.
func (s *scanner) scanLine(line string) { s.scanCode(line, nil) }

// scanCode advances over one line, calling visit for every character of
// code (outside strings and comments) after the bracket depth has been
// updated for it. It stops early, returning the index, when visit returns
// true; otherwise it returns -1.
func (s *scanner) scanCode(line string, visit func(c byte, depth int) bool) int {
	s.continued = false
	i := 0
	for i < len(line) {
		c := line[i]
		if s.quote != "" {
			switch {
			case c == '\\':
				i += 2
				if i >= len(line) && len(s.quote) == 1 {
					s.continued = true // string continued on the next line
				}
				continue
			case strings.HasPrefix(line[i:], s.quote):
				i += len(s.quote)
				s.quote = ""
				continue
			case c == '\n' && len(s.quote) == 1:
				s.quote = "" // unterminated: Python would reject it; recover
			}
			i++
			continue
		}
		switch c {
		case '#':
			return -1
		case '\'', '"':
			if strings.HasPrefix(line[i:], strings.Repeat(string(c), 3)) {
				s.quote = strings.Repeat(string(c), 3)
				i += 3
				continue
			}
			s.quote = string(c)
		case '(', '[', '{':
			s.depth++
		case ')', ']', '}':
			if s.depth > 0 {
				s.depth--
			}
		case '\\':
			if strings.TrimRight(line[i+1:], "\r\n") == "" {
				s.continued = true
				return -1
			}
		}
		if visit != nil && visit(c, s.depth) {
			return i
		}
		i++
	}
	return -1
}

// docstring returns the cleaned docstring of a function whose source
// starts at its def line, or "".
func docstring(src string) string {
	// Find the colon that ends the header: the first ':' outside strings,
	// comments and brackets (parameter annotations sit inside the
	// brackets, and a return annotation holds no bare colon).
	var sc scanner
	body := ""
	for off := 0; off < len(src) && body == ""; {
		end := strings.IndexByte(src[off:], '\n')
		if end < 0 {
			end = len(src) - off - 1
		}
		line := src[off : off+end+1]
		if idx := headerColon(&sc, line); idx >= 0 {
			body = src[off+idx+1:]
			break
		}
		off += end + 1
	}
	body = skipSpaceAndComments(body)
	j := 0
	for j < len(body) && j < 2 && strings.ContainsRune("rRuU", rune(body[j])) {
		j++
	}
	rest := body[j:]
	for _, q := range []string{`"""`, `'''`, `"`, `'`} {
		if !strings.HasPrefix(rest, q) {
			continue
		}
		closeAt := strings.Index(rest[len(q):], q)
		if closeAt < 0 {
			return ""
		}
		raw := rest[len(q) : len(q)+closeAt]
		if j == 0 {
			raw = unescape(raw)
		}
		return cleandoc(raw)
	}
	return ""
}

// headerColon scans one line and returns the index of the header's ':'
// (the first colon in code at bracket depth 0), or -1.
func headerColon(sc *scanner, line string) int {
	return sc.scanCode(line, func(c byte, depth int) bool { return c == ':' && depth == 0 })
}

func skipSpaceAndComments(s string) string {
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		if !strings.HasPrefix(s, "#") {
			return s
		}
		nl := strings.IndexByte(s, '\n')
		if nl < 0 {
			return ""
		}
		s = s[nl+1:]
	}
}

// unescape handles the escapes that matter in docstrings.
func unescape(s string) string {
	return strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\"`, `"`, `\'`, `'`, `\\`, `\`).Replace(s)
}

// cleandoc is inspect.cleandoc: strip the first line, remove the common
// indentation of the others, drop leading and trailing blank lines.
func cleandoc(doc string) string {
	lines := strings.Split(strings.ReplaceAll(doc, "\t", "        "), "\n")
	indent := -1
	for _, l := range lines[1:] {
		if t := strings.TrimLeft(l, " "); t != "" {
			if n := len(l) - len(t); indent < 0 || n < indent {
				indent = n
			}
		}
	}
	lines[0] = strings.TrimLeft(lines[0], " ")
	for i := 1; i < len(lines); i++ {
		if indent > 0 && len(lines[i]) >= indent {
			lines[i] = lines[i][indent:]
		} else {
			lines[i] = strings.TrimLeft(lines[i], " ")
		}
	}
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}
