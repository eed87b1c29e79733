package channel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func frame(body string) []byte {
	b := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	copy(b[4:], body)
	return b
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("é", 3<<20) // multi-byte text well past any line limit
	msgs := []*Message{
		{T: "exec", ID: 1, Code: "print(1)", Limit: 10},
		{T: "out", ID: 1, Stream: "stdout", Data: big},
		{T: "reply", ID: 7, OK: Bool(false), Error: "nope"},
		{T: "done", ID: 1, OK: Bool(true), Dropped: map[string]int64{"stdout": 5}},
	}
	var buf bytes.Buffer
	w := New(nil, &buf)
	for _, m := range msgs {
		if err := w.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	r := New(&buf, nil)
	for _, want := range msgs {
		got, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("message differs (-want +got):\n%s", diff[:min(len(diff), 500)])
		}
	}
	if _, err := r.Read(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	tooBig := make([]byte, 4)
	binary.BigEndian.PutUint32(tooBig, MaxFrameBytes+1)
	for _, tc := range []struct {
		name  string
		input []byte
		want  string
	}{
		{"frame over the cap", tooBig, "too large"},
		{"eof inside header", []byte{0, 0}, "inside a frame header"},
		{"eof inside body", frame(`{"t":"out"}`)[:8], "inside a 11-byte frame"},
		{"not json", frame(`hello`), "bad frame"},
		{"no type", frame(`{"id":3}`), "missing message type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(bytes.NewReader(tc.input), nil).Read()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read() error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// Concurrent writers never interleave frames.
func TestConcurrentWritesStayFramed(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	half := func(p []byte) int {
		mu.Lock()
		defer mu.Unlock()
		n, _ := buf.Write(p)
		return n
	}
	w := New(nil, writerFunc(func(p []byte) (int, error) {
		// Each half is written on its own, as a pipe may split a large
		// write, so only Conn's frame lock keeps frames whole.
		n1 := half(p[:len(p)/2])
		runtime.Gosched()
		return n1 + half(p[len(p)/2:]), nil
	}))
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				_ = w.Write(&Message{T: "reply", ID: int64(i), Data: strings.Repeat("x", i*100)})
			}
		}()
	}
	wg.Wait()
	r := New(&buf, nil)
	for n := 0; ; n++ {
		m, err := r.Read()
		if errors.Is(err, io.EOF) {
			if n != 16*50 {
				t.Fatalf("read %d frames, want %d", n, 16*50)
			}
			return
		}
		if err != nil {
			t.Fatalf("frame %d: %v", n, err)
		}
		if len(m.Data) != int(m.ID)*100 {
			t.Fatalf("frame %d corrupted", n)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
