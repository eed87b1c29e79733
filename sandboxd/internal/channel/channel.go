// Package channel speaks the framed protocol between sandboxd and the agent
// inside a sandbox (docs/PROTOCOL.md): a 4-byte big-endian length, then one
// JSON object whose "t" field names its message type (and, in a blob frame,
// bytes after it: blob.go). Each type is one Go
// struct (message.go); a call's parameters are one struct per method
// (method.go); a failed reply carries an error code (error.go).
package channel

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// MaxFrameBytes bounds one frame. A larger frame is a protocol error.
const MaxFrameBytes = 64 << 20

// ErrFrameTooLarge reports a frame over MaxFrameBytes.
var ErrFrameTooLarge = errors.New("channel frame too large")

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
// A frame of a type this package does not know reads as *Unknown.
func (c *Conn) Read() (Message, error) {
	body, err := readFrame(c.r)
	if err != nil {
		return nil, err
	}
	m, err := Decode(body)
	if err != nil {
		return nil, fmt.Errorf("bad frame from sandbox: %w", err)
	}
	return m, nil
}

// readFrame reads one frame's body.
func readFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
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
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("channel closed inside a %d-byte frame: %w", n, err)
	}
	return buf, nil
}

// Write sends one message.
func (c *Conn) Write(m Message) error {
	body, err := Encode(m)
	if err != nil {
		return err
	}
	if len(body) > MaxFrameBytes {
		return fmt.Errorf("%w: %s frame of %d bytes (max %d)", ErrFrameTooLarge, m.Type(), len(body), MaxFrameBytes)
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
	c.mu.Lock()
	defer c.mu.Unlock()
	// Two writes rather than a copy of a body that may be tens of MiB.
	if _, err := c.w.Write(hdr[:]); err != nil {
		return err
	}
	_, err = c.w.Write(body)
	return err
}
