// Package chunk cuts a byte stream into bounded messages, for the backup
// streams of memoryd's services.
package chunk

// Size is the most one message carries, well under the suite's gRPC
// message limit.
const Size = 1 << 20

// Writer buffers writes and hands Send one chunk of at most Size bytes at
// a time. Call Flush at the end for the rest.
type Writer struct {
	Send func([]byte) error
	buf  []byte
}

// Write implements io.Writer.
func (w *Writer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if w.buf == nil {
			w.buf = make([]byte, 0, Size)
		}
		take := min(Size-len(w.buf), len(p))
		w.buf = append(w.buf, p[:take]...)
		p = p[take:]
		if len(w.buf) == Size {
			if err := w.Flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// Flush sends what is buffered. gRPC may still read a sent message (stats
// handlers), so the next chunk gets a fresh buffer.
func (w *Writer) Flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.Send(w.buf)
	w.buf = nil
	return err
}
