// Package argview renders a tool call's arguments for a person asked to
// approve the call: secrets masked (by their key or their form), long or
// deep values cut, the whole bounded. sandboxd's broker uses it for the
// sandbox's calls, the gateway for the passthrough surface's.
package argview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Bounds of the arguments shown to a person asked to approve a call: the
// question must fit a dialog, and a model could pass megabytes.
const (
	maxString = 200  // runes of one string
	maxItems  = 20   // items of one array or keys of one object
	maxDepth  = 6    // levels of nesting
	MaxBytes  = 2000 // bytes of the whole
)

// Masked replaces a value that looks like a secret.
const Masked = "[masked]"

// secretKey matches the argument names whose values are secrets whatever
// they look like ("author" and "pass" are not among them).
var secretKey = regexp.MustCompile(`(?i)(pass(word|wd|phrase)|secret|token|api[-_]?key|access[-_]?key|private[-_]?key|credential|cookie|authorization|^auth$|^auth[-_]|[-_]auth$|bearer|^signature$)`)

// secretForms are the forms of common credentials, found anywhere in a
// string and replaced: provider API keys, GitHub, GitLab and Slack
// tokens, AWS key IDs, Google API keys, JWTs, PEM private keys, bearer
// headers, key=value pairs of secret names, and URL passwords.
var secretForms = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)`), Masked},
	{regexp.MustCompile(`\b((sk|pk|rk)-[A-Za-z0-9_-]{16,}|sk-ant-[A-Za-z0-9_-]+|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]+|glpat-[A-Za-z0-9_-]+|xox[abprs]-[A-Za-z0-9-]+|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)`), Masked},
	{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}`), "${1} " + Masked},
	{regexp.MustCompile(`(?i)\b(pass(word|wd)?|secret|token|api[-_]?key|access[-_]?key)=[^&\s"']+`), "${1}=" + Masked},
	{regexp.MustCompile(`(://[^/:@\s]+:)[^/@\s]+@`), "${1}" + Masked + "@"},
}

// Render renders a call's arguments for a person to judge: JSON, with
// secrets masked (by their key or their form), long strings and deep or
// long values cut, and the whole bounded.
func Render(args json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "(arguments that are not JSON)"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(shown(v, 0)) // plain values always encode
	out := strings.TrimSuffix(b.String(), "\n")
	if len(out) > MaxBytes {
		cut := out[:MaxBytes]
		for !utf8.ValidString(cut) {
			cut = cut[:len(cut)-1]
		}
		out = cut + fmt.Sprintf("… (%d more bytes)", len(out)-len(cut))
	}
	return out
}

// shown is v as it is shown at depth.
func shown(v any, depth int) any {
	if depth >= maxDepth {
		switch v.(type) {
		case map[string]any, []any:
			return "…"
		}
	}
	switch x := v.(type) {
	case string:
		return shownString(x)
	case []any:
		n := min(len(x), maxItems)
		out := make([]any, 0, n+1)
		for _, it := range x[:n] {
			out = append(out, shown(it, depth+1))
		}
		if len(x) > n {
			out = append(out, fmt.Sprintf("… (%d more items)", len(x)-n))
		}
		return out
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make(map[string]any, min(len(keys), maxItems)+1)
		for i, k := range keys {
			if i == maxItems {
				out["…"] = fmt.Sprintf("%d more keys", len(keys)-i)
				break
			}
			// A number under such a name (max_tokens) is no secret.
			switch x[k].(type) {
			case string, map[string]any, []any:
				if secretKey.MatchString(k) {
					out[k] = Masked
					continue
				}
			}
			out[k] = shown(x[k], depth+1)
		}
		return out
	}
	return v
}

// shownString masks what looks like a secret in s and cuts a long s.
func shownString(s string) string {
	for _, f := range secretForms {
		s = f.re.ReplaceAllString(s, f.with)
	}
	if n := utf8.RuneCountInString(s); n > maxString {
		r := []rune(s)
		return string(r[:maxString]) + fmt.Sprintf("… (%d more characters)", n-maxString)
	}
	return s
}
