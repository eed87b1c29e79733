package binfile

import (
	"errors"
	"testing"
)

func TestReader(t *testing.T) {
	t.Parallel()
	r, err := NewReader("toy", "toy1\n", "toy1\n\x03\x02abz")
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.Uvarint()
	if err != nil || n != 3 {
		t.Fatalf("Uvarint() = %d, %v; want 3", n, err)
	}
	if s, err := r.String("word"); err != nil || s != "ab" {
		t.Fatalf("String() = %q, %v; want ab", s, err)
	}
	if r.Len() != 1 || r.Byte() != 'z' || r.Len() != 0 || r.Rest() != "" {
		t.Fatal("the last byte was not read as the last byte")
	}
	if _, err := r.Uvarint(); err == nil || err.Error() != "toy: truncated" {
		t.Errorf("Uvarint() at the end: %v, want toy: truncated", err)
	}
	for data, want := range map[string]string{"toy0\n": "toy: bad header", "toy1\n\x05ab": "toy: truncated word", "toy1\n": "toy: truncated word"} {
		r, err := NewReader("toy", "toy1\n", data)
		if err == nil {
			_, err = r.String("word")
		}
		if err == nil || err.Error() != want {
			t.Errorf("reading %q: %v, want %s", data, err, want)
		}
	}
}

func TestOnce(t *testing.T) {
	t.Parallel()
	calls := 0
	get := Once(func(data string) (int, error) { calls++; return len(data), nil }, "abc")
	first, second := get(), get()
	if first != 3 || second != 3 || calls != 1 {
		t.Errorf("Once gave %d, then %d, after %d parses; want 3 twice after one", first, second, calls)
	}
	bad := Once(func(string) (int, error) { return 0, errors.New("broken") }, "")
	defer func() {
		if recover() == nil {
			t.Error("Once did not panic on a parse error")
		}
	}()
	bad()
}
