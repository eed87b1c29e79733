package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateKey: serve makes the state dir's key once, owner-only, and
// every later process reads the same; a given file is read, not made; a
// short key is refused, saying what is accepted.
func TestStateKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "state", stateKeyName)
	first, err := readStateKey(path, true)
	if err != nil {
		t.Fatal(err)
	}
	again, err := readStateKey(path, true)
	if err != nil || string(again) != string(first) || len(first) != 64 {
		t.Fatalf("the key read again is %q (%v), want %q, 64 hex digits", again, err, first)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key file's mode is %v (%v), want 0600", fi.Mode(), err)
	}
	if _, err := readStateKey(filepath.Join(dir, "missing"), false); err == nil {
		t.Error("a missing --request-state-key-file was made up")
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readStateKey(short, false); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("a 6-byte key: %v, want it refused with the minimum", err)
	}
}
