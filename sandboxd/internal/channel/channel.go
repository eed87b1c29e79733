// Package channel speaks the framed protocol between sandboxd and the agent
// inside a sandbox (docs/PROTOCOL.md): a 4-byte big-endian length, then one
// JSON object.
package channel

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// MaxFrameBytes bounds one frame. A larger frame is a protocol error.
const MaxFrameBytes = 64 << 20

// ErrFrameTooLarge reports a frame over MaxFrameBytes.
var ErrFrameTooLarge = errors.New("channel frame too large")

// Message is one protocol message. Fields are the union of every message
// type; T says which apply.
type Message struct {
	T string `json:"t"`

	// ID is the exec id (exec, out, done) or the call id (call, reply).
	ID int64 `json:"id,omitempty"`

	// ready
	Python string `json:"python,omitempty"`
	PID    int    `json:"pid,omitempty"`

	// out
	Stream string `json:"s,omitempty"`
	Data   string `json:"d,omitempty"`

	// exec
	Code       string          `json:"code,omitempty"`
	Servers    json.RawMessage `json:"servers,omitempty"`
	Discovered json.RawMessage `json:"discovered,omitempty"`
	Limit      int64           `json:"limit,omitempty"`
	// First marks a session's first exec in this sandbox (never the
	// pool's warm-up exec): the agent then binds the tenant's saved tools
	// as bare names before the code runs.
	First bool `json:"first,omitempty"`

	// call
	Exec   int64           `json:"exec,omitempty"`
	Method string          `json:"m,omitempty"`
	Params json.RawMessage `json:"p,omitempty"`

	// reply (OK is also used by done)
	OK     *bool           `json:"ok,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`

	// done
	Exit    int              `json:"exit,omitempty"`
	Dropped map[string]int64 `json:"dropped,omitempty"`
}

// Conn reads and writes frames. Reads must come from one goroutine; writes
// may come from many.
type Conn struct {
	r  *bufio.Reader
	mu sync.Mutex
	w  io.Writer
}

// New wraps the two ends of a channel.
func New(r io.Reader, w io.Writer) *Conn {
	return &Conn{r: bufio.NewReaderSize(r, 64<<10), w: w}
}

// Read returns the next message. io.EOF means the agent closed the channel.
func (c *Conn) Read() (*Message, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("channel closed inside a frame header: %w", err)
		}
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrameBytes {
		return nil, fmt.Errorf("%w: %d bytes (max %d)", ErrFrameTooLarge, n, MaxFrameBytes)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return nil, fmt.Errorf("channel closed inside a %d-byte frame: %w", n, err)
	}
	var m Message
	if err := json.Unmarshal(buf, &m); err != nil {
		return nil, fmt.Errorf("bad frame from sandbox: %w", err)
	}
	if m.T == "" {
		return nil, errors.New("bad frame from sandbox: missing message type")
	}
	return &m, nil
}

// Write sends one message.
func (c *Conn) Write(m *Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s frame: %w", m.T, err)
	}
	if len(body) > MaxFrameBytes {
		return fmt.Errorf("%w: %s frame of %d bytes (max %d)", ErrFrameTooLarge, m.T, len(body), MaxFrameBytes)
	}
	frame := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(frame, uint32(len(body)))
	copy(frame[4:], body)
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err = c.w.Write(frame)
	return err
}

// Bool returns a pointer to b, for Message.OK.
func Bool(b bool) *bool { return &b }
