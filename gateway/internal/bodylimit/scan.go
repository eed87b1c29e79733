package bodylimit

// outsideLongestString returns how many bytes of a JSON text lie outside
// its longest string (quotes included in the string). It does not check
// that the text is JSON: whatever parses it next does.
func outsideLongestString(b []byte) int {
	longest, start := 0, -1
	escaped := false
	for i, c := range b {
		switch {
		case start < 0:
			if c == '"' {
				start = i
			}
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			longest = max(longest, i+1-start)
			start = -1
		}
	}
	if start >= 0 { // an unterminated string runs to the end
		longest = max(longest, len(b)-start)
	}
	return len(b) - longest
}
