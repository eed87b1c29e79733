package config

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// str coerces a config value to a string the way upstream's str() does, so
// that numbers and booleans in args and env keep working. A number reads
// the same whichever format wrote it: an integer as its digits, any other
// number as Python writes a float ("1.0", "1000.0" for 1e3, "1e-05").
// Lists and objects, which upstream would print as Python literals, become
// JSON.
func str(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case json.Number:
		return pyNumber(v)
	case bool:
		if v {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return pyFloat(v)
	}
	b, _ := json.Marshal(pyNumbers(v))
	return string(b)
}

// pyNumber is a JSON number as Python's str() prints what json.loads
// makes of it: an int (any size) or a float.
func pyNumber(n json.Number) string {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		if strings.TrimLeft(s, "-0") == "" {
			return "0" // "-0" is the int 0
		}
		return s
	}
	f, _ := strconv.ParseFloat(s, 64) // out of range gives ±Inf, as in Python
	return pyFloat(f)
}

// pyFloat is Python's repr of a float: the shortest form that reads back,
// in exponent notation below 1e-4 and from 1e16, else with a fraction
// (".0" at least).
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX, the shortest digits
	if exp, _ := strconv.Atoi(e[strings.LastIndexByte(e, 'e')+1:]); exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// pyNumbers rewrites the numbers inside a list or object as str() writes
// them, so that they too read the same from JSON and TOML.
func pyNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = pyNumbers(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = pyNumbers(x)
		}
		return out
	case json.Number, int64, float64:
		if s := str(v); s != "nan" && !strings.HasSuffix(s, "inf") {
			return json.Number(s)
		}
		return str(v)
	}
	return v
}
