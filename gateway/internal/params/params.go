// Package params checks and normalises the arguments of the run_python tool
// the way upstream does (upstream-behaviour.md §1.1), so that prompts written
// for upstream get the same validation messages.
package params

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/codeexec/codeexec/services/dial"
)

// Upstream's validation messages, returned verbatim as the summary and error
// of a validation_error result.
const (
	MsgMissingCode    = "Missing 'code' argument"
	MsgServersNotList = "'servers' must be a list"
)

// MsgTimeout is the message for a timeout that is not a number of seconds
// within the accepted range; %s is what was given, %d the maximum.
// Upstream clamped 0, -5 and 100000 silently and refused 2.5; a value the
// call cannot honour is refused here with the range instead.
const MsgTimeout = "'timeout' must be a number of seconds from 1 to %d (fractions accepted), not %s"

// MsgUnknownArgument is the message for arguments run_python does not
// take; %s lists them, then the accepted ones.
const MsgUnknownArgument = "run_python does not take %s; it accepts: %s"

// Accepted are run_python's arguments, as its schema lists them.
var Accepted = []string{"code", "servers", "timeout", "session", "cancel"}

// MsgCancelWithCode refuses a call that asks to cancel and runs code.
const MsgCancelWithCode = "'cancel' stops the session's run in flight and takes no code: pass code=\"\" with cancel=true, or leave cancel out to run code"

// MsgCancelNotBool is the message for a cancel value that is not a boolean.
const MsgCancelNotBool = "'cancel' must be true or false"

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
	// Code is the Python source; "" (given as such) waits for the
	// session's run in flight instead.
	Code string
	// Cancel, with no code, stops the session's run in flight.
	Cancel bool
	// Servers lists the MCP servers to expose, each coerced to a string.
	Servers []string
	// Timeout is the call's timeout, within [1 s, max].
	Timeout time.Duration
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
//   - A timeout is any number of seconds from 1 to the maximum, fractions
//     included; anything else (0, -5, 2×max, true, "5") is refused with
//     the range (MsgTimeout), where upstream clamped out-of-range numbers
//     without a word and refused fractions.
//   - An argument the tool does not take is refused with the accepted
//     list (MsgUnknownArgument), where upstream ignored it.
//   - An explicit null for code, servers or timeout means "not given".
//   - A code value that is not a string says so (MsgCodeNotString), where
//     upstream reports it as missing.
func Parse(args map[string]any, lim Limits) (p RunPython, msg string, ok bool) {
	var unknown []string
	for k := range args {
		if !slices.Contains(Accepted, k) {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return RunPython{}, fmt.Sprintf(MsgUnknownArgument, strings.Join(unknown, ", "), strings.Join(Accepted, ", ")), false
	}
	raw := args["code"]
	code, isString := raw.(string)
	if !isString && raw != nil {
		return RunPython{}, fmt.Sprintf(MsgCodeNotString, jsonType(raw)), false
	}
	// code="" exactly waits for (or, with cancel, stops) the run in
	// flight; missing or blank code is upstream's validation error.
	if (!isString || code != "") && strings.TrimSpace(code) == "" {
		return RunPython{}, MsgMissingCode, false
	}
	if c, present := args["cancel"]; present && c != nil {
		b, isBool := c.(bool)
		if !isBool {
			return RunPython{}, MsgCancelNotBool, false
		}
		if b && code != "" {
			return RunPython{}, MsgCancelWithCode, false
		}
		p.Cancel = b
	}
	if len(code) > MaxCodeBytes {
		return RunPython{}, fmt.Sprintf(MsgCodeTooLarge, len(code), MaxCodeBytes, MaxCodeBytes>>20), false
	}
	p.Code = code

	if raw, present := args["servers"]; present && raw != nil {
		if p.Servers, ok = serverList(raw); !ok {
			return RunPython{}, MsgServersNotList, false
		}
	}

	maxSeconds := max(1, lim.MaxSeconds)
	p.Timeout = time.Duration(Clamp(lim.DefaultSeconds, maxSeconds)) * time.Second
	if raw, present := args["timeout"]; present && raw != nil {
		n, isNumber := number(raw)
		if !isNumber || n < 1 || n > float64(maxSeconds) {
			return RunPython{}, fmt.Sprintf(MsgTimeout, maxSeconds, given(raw)), false
		}
		p.Timeout = time.Duration(n * float64(time.Second))
	}

	if raw, present := args["session"]; present && raw != nil {
		if p.Session, msg = sessionHandle(raw); msg != "" {
			return RunPython{}, msg, false
		}
	}
	return p, "", true
}

// serverList reads the servers argument: a list, whose items are named as
// Python's str() would name them.
func serverList(raw any) ([]string, bool) {
	list, isList := raw.([]any)
	if !isList {
		strs, isStrs := raw.([]string)
		if !isStrs {
			return nil, false
		}
		list = make([]any, len(strs))
		for i, s := range strs {
			list[i] = s
		}
	}
	out := make([]string, 0, len(list))
	for _, v := range list {
		out = append(out, pyStr(v))
	}
	return out, true
}

// sessionHandle reads the session argument, or says what is wrong with it.
func sessionHandle(raw any) (string, string) {
	h, isString := raw.(string)
	if !isString {
		return "", MsgSessionNotString
	}
	h = strings.TrimSpace(h)
	if len(h) > MaxSessionBytes {
		return "", fmt.Sprintf("'session' is %d bytes long; a session handle has at most %d", len(h), MaxSessionBytes)
	}
	if i := strings.IndexFunc(h, notHandleRune); i >= 0 {
		// Not echoed: the value is not a handle, and a client that
		// copies the result's handle must not take it for one.
		return "", fmt.Sprintf("'session' holds %s at byte %d, which no session handle has; pass the handle an earlier result gave (structuredContent.session: letters, digits, '-', '_' and '.'), or leave 'session' out to start a new session", describeRune(h, i), i)
	}
	return h, ""
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

// number reports v as a float64 when it is a finite JSON number.
func number(v any) (float64, bool) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case int:
		f = float64(n)
	case int32:
		f = float64(n)
	case int64:
		f = float64(n)
	case json.Number:
		x, err := n.Float64()
		if err != nil {
			return 0, false
		}
		f = x
	default:
		return 0, false
	}
	return f, !math.IsNaN(f) && !math.IsInf(f, 0)
}

// given renders a refused value for a message: numbers as JSON has them,
// anything else with its JSON type.
func given(v any) string {
	if f, ok := number(v); ok {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	if s, ok := v.(string); ok {
		return "the string " + strconv.Quote(s)
	}
	return jsonType(v)
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
