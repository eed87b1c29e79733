package upstream

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// stderrTailBytes is how much of a server's stderr is kept for error
// messages: enough for a stack trace's last frames, small enough to log.
const stderrTailBytes = 4 << 10

// ring keeps the last stderrTailBytes written to it. It never blocks, so a
// chatty server can never stall on a full stderr pipe.
type ring struct {
	mu  sync.Mutex
	buf []byte
}

// Write appends p, dropping the oldest bytes beyond the capacity.
func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if over := len(r.buf) - stderrTailBytes; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
	return len(p), nil
}

// Tail returns the kept text, trimmed, starting at a valid UTF-8 boundary.
func (r *ring) Tail() string {
	r.mu.Lock()
	b := append([]byte(nil), r.buf...)
	r.mu.Unlock()
	for len(b) > 0 && !utf8.Valid(b[:min(len(b), 4)]) && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
}

// withTail appends a stderr tail to a message when there is one.
func withTail(msg, tail string) string {
	if tail == "" {
		return msg + " (stderr was empty)"
	}
	return msg + "\nstderr (last lines):\n" + tail
}
