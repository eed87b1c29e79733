// Package params checks and normalises the arguments of the run_python tool
// the way upstream does (upstream-behaviour.md §1.1), so that prompts written
// for upstream get the same validation messages.
package params

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/codeexec/codeexec/services/dial"
)

// Upstream's validation messages, returned verbatim as the summary and error
// of a validation_error result.
const (
	MsgMissingCode    = "Missing 'code' argument"
	MsgServersNotList = "'servers' must be a list"
	MsgTimeoutNotInt  = "'timeout' must be an integer"
)

// MsgSessionNotString is the message for a session value that is not a
// string.
const MsgSessionNotString = "'session' must be a string: the session handle from an earlier result"

// MaxSessionBytes bounds a session handle; codeexec's are 32 hex digits.
const MaxSessionBytes = 128

// MsgCodeNotString is the message for a code value that is present but not
// a string; %s is its JSON type. Upstream calls that missing code, which
// sends the caller looking for the wrong mistake.
const MsgCodeNotString = "'code' must be a string of Python source, not %s"

// MaxCodeBytes bounds the code of one call. The code travels to sandboxd
// in one gRPC message, which the gateway's client caps at
// dial.MaxMessageBytes; the rest of the request (session, tenant, servers,
// timeout) gets the 1 MiB left over.
const MaxCodeBytes = dial.MaxMessageBytes - 1<<20

// MsgCodeTooLarge is the message for code over MaxCodeBytes: its length,
// then the limit in bytes and in MiB. Retrying cannot help, so it says what
// to do instead.
const MsgCodeTooLarge = "'code' is %d bytes; run_python accepts at most %d bytes (%d MiB) of code. " +
	"Do not inline large data in the code: write it to a file under /workspace in smaller calls, " +
	"or fetch it from inside the sandbox, and read it from there"

// RunPython holds validated run_python arguments.
type RunPython struct {
	// Code is the Python source, never blank.
	Code string
	// Servers lists the MCP servers to expose, each coerced to a string.
	Servers []string
	// TimeoutSeconds is the effective timeout, within [1, max].
	TimeoutSeconds int
	// Session is the handle of the session to continue, or "" for the
	// caller's MCP session (or, without one, a new session).
	Session string
}

// Limits are the timeout bounds of the tool, in whole seconds.
type Limits struct {
	// DefaultSeconds applies when the caller gives no timeout.
	DefaultSeconds int
	// MaxSeconds is the upper clamp.
	MaxSeconds int
}

// Parse validates raw tool arguments. On bad input it returns a message meant
// for the model (one of the Msg constants) and ok=false.
//
// Deliberate choices where upstream's Python semantics do not carry over:
//   - A timeout arrives as a JSON number, so integral floats (5, 5.0) are
//     accepted and 5.5 is rejected. Booleans are rejected, although Python's
//     isinstance(True, int) let upstream accept them: a boolean timeout is
//     always a mistake. Strings such as "5" are rejected, as upstream does.
//   - An explicit null for code, servers or timeout means "not given".
//   - A code value that is not a string says so (MsgCodeNotString), where
//     upstream reports it as missing.
func Parse(args map[string]any, lim Limits) (p RunPython, msg string, ok bool) {
	raw := args["code"]
	code, isString := raw.(string)
	if !isString && raw != nil {
		return RunPython{}, fmt.Sprintf(MsgCodeNotString, jsonType(raw)), false
	}
	if strings.TrimSpace(code) == "" {
		return RunPython{}, MsgMissingCode, false
	}
	if len(code) > MaxCodeBytes {
		return RunPython{}, fmt.Sprintf(MsgCodeTooLarge, len(code), MaxCodeBytes, MaxCodeBytes>>20), false
	}
	p.Code = code

	if raw, present := args["servers"]; present && raw != nil {
		list, isList := raw.([]any)
		if !isList {
			if strs, isStrs := raw.([]string); isStrs {
				list = make([]any, len(strs))
				for i, s := range strs {
					list[i] = s
				}
			} else {
				return RunPython{}, MsgServersNotList, false
			}
		}
		p.Servers = make([]string, 0, len(list))
		for _, v := range list {
			p.Servers = append(p.Servers, pyStr(v))
		}
	}

	timeout := lim.DefaultSeconds
	if raw, present := args["timeout"]; present && raw != nil {
		n, isInt := integer(raw)
		if !isInt {
			return RunPython{}, MsgTimeoutNotInt, false
		}
		timeout = n
	}
	p.TimeoutSeconds = Clamp(timeout, lim.MaxSeconds)

	if raw, present := args["session"]; present && raw != nil {
		h, isString := raw.(string)
		if !isString {
			return RunPython{}, MsgSessionNotString, false
		}
		h = strings.TrimSpace(h)
		if len(h) > MaxSessionBytes {
			return RunPython{}, fmt.Sprintf("'session' is %d bytes long; a session handle has at most %d", len(h), MaxSessionBytes), false
		}
		if i := strings.IndexFunc(h, notHandleRune); i >= 0 {
			// Not echoed: the value is not a handle, and a client that
			// copies the result's handle must not take it for one.
			return RunPython{}, fmt.Sprintf("'session' holds %s at byte %d, which no session handle has; pass the handle an earlier result gave (structuredContent.session: letters, digits, '-', '_' and '.'), or leave 'session' out to start a new session", describeRune(h, i), i), false
		}
		p.Session = h
	}
	return p, "", true
}

// notHandleRune reports whether r can be in no session handle. codeexec's
// handles are 32 hex digits; the set accepted is wider, so that a handle
// of another form (a future one) is asked about, not refused here.
func notHandleRune(r rune) bool {
	return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '-' && r != '_' && r != '.'
}

// describeRune names the character of s at byte i for a message.
func describeRune(s string, i int) string {
	r, _ := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError || !unicode.IsPrint(r) || unicode.IsSpace(r) {
		return fmt.Sprintf("the character %U", r)
	}
	return fmt.Sprintf("%q", r)
}

// jsonType names the JSON type of a decoded value, as a message would.
func jsonType(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case float64, float32, int, int32, int64, json.Number:
		return "a number"
	case []any, []string:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// Clamp bounds a timeout to [1, max] seconds.
func Clamp(seconds, maxSeconds int) int {
	return max(1, min(seconds, maxSeconds))
}

// integer reports v as an int when it holds a whole number. Values beyond
// the int range saturate, since they are clamped anyway.
func integer(v any) (int, bool) {
	switch n := v.(type) {
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) || n != math.Trunc(n) {
			return 0, false
		}
		return saturate(n), true
	case float32:
		return integer(float64(n))
	case int:
		return n, true
	case int32:
		return int(n), true
	case int64:
		return saturate(float64(n)), true
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return saturate(float64(i)), true
		}
		if f, err := n.Float64(); err == nil {
			return integer(f)
		}
	}
	return 0, false
}

func saturate(f float64) int {
	switch {
	case f > math.MaxInt32:
		return math.MaxInt32
	case f < math.MinInt32:
		return math.MinInt32
	}
	return int(f)
}

// pyStr turns a JSON value into text the way Python's str() would, since
// upstream coerces every servers element with str().
func pyStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e16 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprint(v)
}
