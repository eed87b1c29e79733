package notfound

import (
	"io"

	"github.com/codeexec/codeexec/gateway/internal/jsonl"
)

// Stdio wraps the two ends of a newline-delimited JSON-RPC stream (the
// stdio transport): reads of resources/read requests from in are noted,
// and mcp-go's not-found answers to them written to out get the URI. A
// read longer than jsonl.MaxLine (its URI that long), or past
// jsonl.MaxPending awaiting their answers, is answered without it. mcp-go
// writes each message to out in one Write call, a newline at its end; a
// Write of any other shape passes through as it is.
func Stdio(in io.Reader, out io.Writer) (io.Reader, io.Writer) {
	r, w, _ := stdio(in, out)
	return r, w
}

// stdio is Stdio, with the reads not yet answered: their URIs by id.
func stdio(in io.Reader, out io.Writer) (io.Reader, io.Writer, *jsonl.Pending[string]) {
	return jsonl.Filter(in, out, noteRead, withURI)
}

// noteRead notes the id and URI of a resources/read request.
func noteRead(p *jsonl.Pending[string], line []byte) {
	if id, uri, ok := parseRead(line); ok {
		p.Add(id, uri)
	}
}
