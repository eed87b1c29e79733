package flagenv

import (
	"slices"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"30", 30 * time.Second, false},
		{"30s", 30 * time.Second, false},
		{"2.5", 2500 * time.Millisecond, false},
		{"1m30s", 90 * time.Second, false},
		{" 120 ", 120 * time.Second, false},
		{"-1", 0, true},
		{"soon", 0, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDuration(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v, err=%v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"512m", 512 << 20, false},
		{"512M", 512 << 20, false},
		{"512MiB", 512 << 20, false},
		{"1g", 1 << 30, false},
		{"64k", 64 << 10, false},
		{"1.5g", 3 << 29, false},
		{"4096", 4096, false},
		{"lots", 0, true},
		{"-5m", 0, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseBytes(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("ParseBytes(%q) = %v, %v; want %v, err=%v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestSetReadsEnvAndReportsBadValues(t *testing.T) {
	t.Parallel()
	env := map[string]string{"MCP_BRIDGE_TIMEOUT": "45", "MCP_BRIDGE_MEMORY": "1g", "MCP_BRIDGE_PIDS": "many", "CODEEXEC_FLAG": "yes"}
	s := New("t", func(k string) string { return env[k] })
	var (
		d   time.Duration
		b   int64
		n   int
		flg bool
	)
	s.Duration(&d, "timeout", 30*time.Second, "", "MCP_BRIDGE_TIMEOUT")
	s.Bytes(&b, "memory", 512<<20, "", "MCP_BRIDGE_MEMORY")
	s.Int(&n, "pids", 128, "", "MCP_BRIDGE_PIDS")
	s.Bool(&flg, "flag", false, "", "CODEEXEC_FLAG")
	if err := s.Parse([]string{"--memory", "256m"}); err != nil {
		t.Fatal(err)
	}
	if d != 45*time.Second || b != 256<<20 || n != 128 || !flg {
		t.Fatalf("got timeout=%v memory=%d pids=%d flag=%v", d, b, n, flg)
	}
	if err := s.Err(); err == nil {
		t.Fatal("want an error for MCP_BRIDGE_PIDS=many")
	}
}

func TestStrings(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want []string
	}{
		{"neither", "", nil, nil},
		{"env", "a.b, c.*,,", nil, []string{"a.b", "c.*"}},
		{"flags replace env", "a.b", []string{"-approve", "x.y", "-approve", "z.*"}, []string{"x.y", "z.*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New("t", func(k string) string {
				if k == "APPROVE" {
					return tc.env
				}
				return ""
			})
			var got []string
			s.Strings(&got, "approve", "rules", "APPROVE")
			if err := s.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
