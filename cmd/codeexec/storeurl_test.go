package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// A URL with a password on the command line is refused by every command
// that takes one, with a message that says how to pass the password, and
// without repeating it; the same URL in CODEEXEC_STORE is accepted.
func TestStoreFlagRefusesAPassword(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"memoryd", "--store", "postgres://u:s3cret@127.0.0.1:1/x"},
		{"serve", "--store", "postgres://u:s3cret@127.0.0.1:1/x"},
		{"import-upstream", "--store", "postgres://u:s3cret@127.0.0.1:1/x", t.TempDir()},
		{"memoryd", "backup", "--store", "postgres://127.0.0.1:1/x?password=s3cret", filepath.Join(t.TempDir(), "b.db")},
		{"memoryd", "copy", "--from", "m.db", "--to", "postgres://u:s3cret@127.0.0.1:1/x"},
	} {
		var stdout, stderr bytes.Buffer
		getenv := func(k string) string { return map[string]string{"HOME": t.TempDir()}[k] }
		err := run(t.Context(), args, getenv, strings.NewReader(""), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "carries a password") || !strings.Contains(err.Error(), "PGPASSWORD") {
			t.Errorf("%v: %v, want a refusal that names PGPASSWORD", args, err)
		}
		if all := fmt.Sprint(err) + stdout.String() + stderr.String(); strings.Contains(all, "s3cret") {
			t.Errorf("%v: the password shows in the output: %s", args, all)
		}
	}
	// From the environment: accepted (the database is not there, so the
	// copy fails later, for that reason).
	getenv := func(k string) string {
		return map[string]string{"HOME": t.TempDir(), "CODEEXEC_COPY_TO": "postgres://u:s3cret@127.0.0.1:1/x"}[k]
	}
	var out bytes.Buffer
	err := run(t.Context(), []string{"memoryd", "copy", "--from", "nonexistent.db"}, getenv, strings.NewReader(""), &out, &out)
	if err == nil || strings.Contains(err.Error(), "carries a password") || !strings.Contains(err.Error(), "no bbolt database") {
		t.Errorf("URL with a password from the environment: %v", err)
	}
}
