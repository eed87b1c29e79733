package params

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// FuzzParse feeds run_python arbitrary JSON arguments, decoded as mcp-go
// decodes them (plain numbers) and with json.Number, under arbitrary
// limits. It must not panic; it accepts exactly the arguments whose code
// is a non-blank string or exactly "" (which waits for, or with cancel
// stops, the run in flight), whose servers are a list or absent, and whose
// timeout is a whole number or absent; what it accepts keeps the code
// verbatim, one server per list element, and a timeout within [1, max];
// and both decodings give the same answer.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"code": "print(1)"}`,
		`{"code": "x", "servers": ["a", 1, true, null, 2.5, {"k": [1]}], "timeout": 5}`,
		`{"code": "x", "timeout": 5.0}`,
		`{"code": "x", "timeout": 5.5}`,
		`{"code": "x", "timeout": -1e300}`,
		`{"code": "x", "timeout": 12345678901234567890}`,
		`{"code": "x", "timeout": true}`,
		`{"code": "x", "servers": "github"}`,
		`{"code": " \n"}`,
		`{"code": ""}`,
		`{"code": "", "cancel": true}`,
		`{"code": 5}`,
		`{"code": null, "servers": null, "timeout": null}`,
		`{}`,
	} {
		f.Add([]byte(s), 30, 120)
	}
	f.Fuzz(func(t *testing.T, data []byte, def, maxSeconds int) {
		var args map[string]any
		if json.Unmarshal(data, &args) != nil {
			return
		}
		lim := Limits{DefaultSeconds: def, MaxSeconds: maxSeconds}
		p, msg, ok := Parse(args, lim)
		if ok != (msg == "") {
			t.Fatalf("Parse = ok %v with message %q: a message comes with a refusal only", ok, msg)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var numbers map[string]any
		if dec.Decode(&numbers) != nil {
			t.Fatalf("%q decodes without json.Number but not with it", data)
		}
		// Servers may read differently (json.Number keeps "5.0" apart from
		// "5", as Python's str() does); everything else must agree.
		q, qmsg, qok := Parse(numbers, lim)
		if qok != ok || qmsg != msg || q.Code != p.Code || q.Timeout != p.Timeout || len(q.Servers) != len(p.Servers) {
			t.Errorf("with json.Number: %+v %q %v; with float64: %+v %q %v", q, qmsg, qok, p, msg, ok)
		}
		if !ok {
			return
		}
		if code, _ := args["code"].(string); p.Code != code || (code != "" && strings.TrimSpace(code) == "") {
			t.Errorf("accepted code %q from %q", p.Code, args["code"])
		}
		if list, _ := args["servers"].([]any); len(p.Servers) != len(list) {
			t.Errorf("%d servers from a list of %d", len(p.Servers), len(list))
		}
		if p.Timeout < time.Second || (maxSeconds >= 1 && p.Timeout > time.Duration(maxSeconds)*time.Second) {
			t.Errorf("timeout %s outside [1s, %ds]", p.Timeout, maxSeconds)
		}
	})
}
