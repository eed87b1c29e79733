package notfound

import (
	"io"

	"github.com/codeexec/codeexec/gateway/internal/jsonl"
)

const (
	// maxRequest is the longest line read as a possible resources/read
	// request; a longer one is a tool call, and is not copied. A read of a
	// longer URI is answered without the data.
	maxRequest = 64 << 10
	// maxPending bounds the reads awaiting their answer; past it, new ones
	// are answered without the data.
	maxPending = 1024
)

// Stdio wraps the two ends of a newline-delimited JSON-RPC stream (the
// stdio transport): reads of resources/read requests from in are noted,
// and mcp-go's not-found answers to them written to out get the URI.
// mcp-go writes each message to out in one Write call, a newline at its
// end; a Write of any other shape passes through as it is.
func Stdio(in io.Reader, out io.Writer) (io.Reader, io.Writer) {
	r, w, _ := stdio(in, out)
	return r, w
}

// stdio is Stdio, with the reads not yet answered: their URIs by id.
func stdio(in io.Reader, out io.Writer) (io.Reader, io.Writer, *jsonl.Pending[string]) {
	p := jsonl.NewPending[string](maxPending)
	note := func(line []byte) {
		if id, uri, ok := parseRead(line); ok {
			p.Add(id, uri)
		}
	}
	return jsonl.Lines(in, maxRequest, note), jsonl.Answers(out, p, withURI), p
}
