package toon

import "testing"

func TestEncode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		fields []Field
		want   string
	}{
		{"empty", nil, ""},
		{"plain string", []Field{{"status", "success"}}, "status: success"},
		{"int and bool", []Field{{"exitCode", 0}, {"ok", true}, {"n", int64(-3)}}, "exitCode: 0\nok: true\nn: -3"},
		{"inner spaces stay bare", []Field{{"summary", "Success (no output)"}}, "summary: Success (no output)"},
		{"colon is quoted", []Field{{"summary", "Timeout: execution exceeded 5s"}}, `summary: "Timeout: execution exceeded 5s"`},
		{"array", []Field{{"stdout", []string{"line1", "line2"}}}, "stdout[2]: line1,line2"},
		{"empty array", []Field{{"stdout", []string{}}}, "stdout[0]:"},
		{"array items quoted when needed", []Field{{"stdout", []string{"", "a,b", " x", "42", "true", "-1", "05", `q"`, "ok"}}},
			`stdout[9]: "","a,b"," x","42","true","-1","05","q\"",ok`},
		{"escapes", []Field{{"error", "a\\b\n\tc\r"}}, `error: "a\\b\n\tc\r"`},
		{"brackets", []Field{{"v", "[1]"}, {"w", "{x}"}}, `v: "[1]"` + "\n" + `w: "{x}"`},
		{"unicode bare", []Field{{"v", "héllo — ✓"}}, "v: héllo — ✓"},
		{"odd key quoted", []Field{{"my-key", "v"}, {"a.b", "v"}}, `"my-key": v` + "\na.b: v"},
		{"number-like words", []Field{{"v", "1e5"}, {"w", "1.5x"}}, `v: "1e5"` + "\nw: 1.5x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Encode(tt.fields)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if got != tt.want {
				t.Errorf("Encode() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestEncodeUnsupported(t *testing.T) {
	t.Parallel()
	if _, err := Encode([]Field{{"x", map[string]int{"a": 1}}}); err == nil {
		t.Fatal("Encode(map) succeeded; want an error")
	}
	if got, err := Encode([]Field{{"t", 2.5}, {"u", 30.0}}); err != nil || got != "t: 2.5\nu: 30" {
		t.Fatalf("Encode(floats) = %q, %v; want t: 2.5, u: 30", got, err)
	}
}
