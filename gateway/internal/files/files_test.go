package files

import (
	"errors"
	"testing"
)

func TestURIRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		session, path string
		calls         uint64
		want          string
	}{
		{"0123abcd", "out/chart.png", 7, "codeexec://session/0123abcd/out/chart.png?v=7"},
		{"0123abcd", "out/a b/ü.csv", 0, "codeexec://session/0123abcd/out/a%20b/%C3%BC.csv"},
	} {
		uri := URI(tc.session, tc.calls, tc.path)
		if uri != tc.want {
			t.Errorf("URI = %q, want %q", uri, tc.want)
		}
		s, p, v, err := Parse(uri)
		if err != nil || s != tc.session || p != tc.path || v != tc.calls {
			t.Errorf("Parse(%q) = %q %q %d %v", uri, s, p, v, err)
		}
	}
}

func TestParseRefusesOtherURIs(t *testing.T) {
	t.Parallel()
	for _, uri := range []string{
		"resource://mcp-server-code-execution-mode/capabilities",
		"codeexec://other/abc/out/x",
		"codeexec://session/abc",
		"codeexec://session//out/x",
		"codeexec://session/abc/out/../../etc/passwd",
		"codeexec://session/abc/out/x?v=seven",
		"::not a uri",
	} {
		if _, _, _, err := Parse(uri); !errors.Is(err, ErrBadURI) {
			t.Errorf("Parse(%q): %v, want ErrBadURI", uri, err)
		}
	}
}

func TestIsText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mime string
		data string
		want bool
	}{
		{"text/csv", "a,b\n", true},
		{"application/json", `{"a":1}`, true},
		{"application/octet-stream", "plain words", true},
		{"application/octet-stream", "nul\x00byte", false},
		{"image/svg+xml", "<svg/>", false},
		{"text/plain", "\xff\xfe", false},
	} {
		if got := isText(tc.mime, []byte(tc.data)); got != tc.want {
			t.Errorf("isText(%q, %q) = %v", tc.mime, tc.data, got)
		}
	}
}
