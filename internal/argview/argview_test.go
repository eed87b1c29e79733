package argview

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 250)
	many := make([]int, 30)
	manyJSON, _ := json.Marshal(many)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", `{"path":"/tmp/x","n":3}`, `{"n":3,"path":"/tmp/x"}`},
		{"secret keys", `{"password":"hunter2","apiKey":"abc","max_tokens":100,"author":"Jane","headers":{"Authorization":"Basic eA=="}}`,
			`{"apiKey":"[masked]","author":"Jane","headers":{"Authorization":"[masked]"},"max_tokens":100,"password":"[masked]"}`},
		{"secret forms", `{"a":"ghp_abcdefghijklmnopqrstuvwxyz012345","b":"AKIAABCDEFGHIJKLMNOP","c":"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig","d":"Bearer abcdefghijklmnopqrstuv","e":"hello"}`,
			`{"a":"[masked]","b":"[masked]","c":"[masked]","d":"Bearer [masked]","e":"hello"}`},
		{"secrets inside text", `{"s":"use token=abc123 and ghp_abcdefghijklmnopqrstuvwxyz012345 then\n-----BEGIN RSA PRIVATE KEY-----\nMIIx\n-----END RSA PRIVATE KEY-----\ndone","q":"a=1&api_key=zz&b=2"}`,
			`{"q":"a=1&api_key=[masked]&b=2","s":"use token=[masked] and [masked] then\n[masked]\ndone"}`},
		{"url password", `{"db":"postgres://app:s3cret@db:5432/x"}`, `{"db":"postgres://app:[masked]@db:5432/x"}`},
		{"long string", `{"s":"` + long + `"}`, `{"s":"` + strings.Repeat("é", 200) + `… (50 more characters)"}`},
		{"long array", `{"a":` + string(manyJSON) + `}`, `{"a":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"… (10 more items)"]}`},
		{"deep", `{"a":{"b":{"c":{"d":{"e":{"f":{"g":1}}}}}}}`, `{"a":{"b":{"c":{"d":{"e":{"f":"…"}}}}}}`},
		{"not json", `{`, `(arguments that are not JSON)`},
		{"big number kept", `{"n":12345678901234567890}`, `{"n":12345678901234567890}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Render(json.RawMessage(tc.in)); got != tc.want {
				t.Errorf("Render(%s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
		})
	}
	var big strings.Builder
	big.WriteString(`{`)
	for i := range 20 {
		if i > 0 {
			big.WriteString(",")
		}
		big.WriteString(`"k` + string(rune('a'+i)) + `":"` + strings.Repeat("x", 190) + `"`)
	}
	big.WriteString(`}`)
	if got := Render(json.RawMessage(big.String())); len(got) > MaxBytes+40 || !strings.Contains(got, "more bytes)") {
		t.Errorf("a large object is shown in %d bytes: %.80s…", len(got), got)
	}
}
