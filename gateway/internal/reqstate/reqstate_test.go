package reqstate

import (
	"errors"
	"strings"
	"testing"
)

func TestSealOpen(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	s, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	state := s.Seal("rp1.", "alice", []byte(`{"s":"x"}`))
	if body, err := s.Open("rp1.", "alice", state); err != nil || string(body) != `{"s":"x"}` {
		t.Fatalf("Open(Seal) = %q, %v", body, err)
	}
	same, _ := New(key)
	if _, err := same.Open("rp1.", "alice", state); err != nil {
		t.Errorf("another gateway with the same key refused the state: %v", err)
	}
	other, _ := New(nil)
	body, sig, _ := strings.Cut(strings.TrimPrefix(state, "rp1."), ".")
	forged := s.Seal("rp1.", "alice", []byte(`{"s":"y"}`))
	_, forgedSig, _ := strings.Cut(strings.TrimPrefix(forged, "rp1."), ".")
	for name, open := range map[string]func() error{
		"another tenant": func() error { _, err := s.Open("rp1.", "bob", state); return err },
		"another tool":   func() error { _, err := s.Open("ct1.", "alice", "ct1."+body+"."+sig); return err },
		"another key":    func() error { _, err := other.Open("rp1.", "alice", state); return err },
		"altered body":   func() error { _, err := s.Open("rp1.", "alice", "rp1.eyJzIjoieSJ9."+sig); return err },
		"swapped MAC":    func() error { _, err := s.Open("rp1.", "alice", "rp1."+body+"."+forgedSig); return err },
		"no MAC":         func() error { _, err := s.Open("rp1.", "alice", "rp1."+body); return err },
		"empty":          func() error { _, err := s.Open("rp1.", "alice", ""); return err },
		"not base64":     func() error { _, err := s.Open("rp1.", "alice", "rp1.!!.!!"); return err },
	} {
		if err := open(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Open = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := New([]byte("short")); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("New(5 bytes) = %v, want the minimum named", err)
	}
}
