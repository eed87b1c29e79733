// Package jsonl reads the newline-delimited JSON-RPC stream of the stdio
// transport as it passes: the lines read from the client, and the ids of
// the messages written to it, and the requests whose answers are still to
// come. The gateway's stdio filters (notfound, cancelled) are built on it.
package jsonl

import (
	"bytes"
	"encoding/json"
	"io"
)

// Lines returns a reader of r that passes each whole line read through it
// to each, without its newline, once its end is read. A line longer than
// limit bytes is neither copied nor passed; nor is a last line without its
// newline.
func Lines(r io.Reader, limit int, each func(line []byte)) io.Reader {
	return &lines{r: r, max: limit, each: each}
}

type lines struct {
	r    io.Reader
	max  int
	each func([]byte)
	line []byte // the start of a line whose end has not been read yet
	long bool   // that line is longer than max
}

func (q *lines) Read(b []byte) (int, error) {
	n, err := q.r.Read(b)
	q.scan(b[:n])
	return n, err
}

func (q *lines) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			q.keep(b)
			return
		}
		line := b[:i]
		if len(q.line) > 0 || q.long {
			q.keep(line)
			line = q.line
		}
		if !q.long && len(line) <= q.max {
			q.each(line)
		}
		q.line, q.long = q.line[:0], false
		b = b[i+1:]
	}
}

// keep adds part of a line to q.line, unless the line is longer than max.
func (q *lines) keep(part []byte) {
	if q.long {
		return
	}
	if len(q.line)+len(part) > q.max {
		q.line, q.long = q.line[:0], true
		return
	}
	q.line = append(q.line, part...)
}

// IDKey is the form in which an id is compared: mcp-go decodes a request's
// id and encodes it again in the answer, so 1.0 comes back as 1.
func IDKey(raw json.RawMessage) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil || v == nil {
		return "", false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// ResponseID returns the id of a response in IDKey's form, and false for
// a request or a notification.
func ResponseID(msg []byte) (string, bool) {
	var a struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &a) != nil || a.Method != "" || len(a.ID) == 0 {
		return "", false
	}
	return IDKey(a.ID)
}

// Message returns the message that b holds when b is one whole line, as
// mcp-go writes each message in one Write call, a newline at its end; it
// returns false for a Write of any other shape.
func Message(b []byte) ([]byte, bool) {
	msg, ok := bytes.CutSuffix(b, []byte("\n"))
	return msg, ok && bytes.IndexByte(msg, '\n') < 0
}
