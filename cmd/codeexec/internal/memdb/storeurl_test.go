package memdb

import "testing"

func TestStoreURLPasswords(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url      string
		password bool
		redacted string
	}{
		{"postgres://codeexec@db/x", false, "postgres://codeexec@db/x"},
		{"postgres://codeexec:s3cret@db/x", true, "postgres://codeexec:xxxxx@db/x"},
		{"postgresql://u:p@a:5432,b:5432/x?target_session_attrs=read-write", true, "postgresql://u:xxxxx@a:5432,b:5432/x?target_session_attrs=read-write"},
		{"postgres://db/x?sslmode=verify-full&password=s3cret", true, "postgres://db/x?sslmode=verify-full&password=xxxxx"},
		{"postgres://u@db/x?passwordless=1", false, "postgres://u@db/x?passwordless=1"},
		{"postgres://", false, "postgres://"},
	} {
		if got := urlHasPassword(c.url); got != c.password {
			t.Errorf("urlHasPassword(%q) = %v, want %v", c.url, got, c.password)
		}
		if got := redactURL(c.url); got != c.redacted {
			t.Errorf("redactURL(%q) = %q, want %q", c.url, got, c.redacted)
		}
	}
}
