// Package binfile reads the files that lexgen and vecgen generate for the
// search and that internal/lexicon and internal/wordvec embed: a line that
// names the format, then unsigned varints, strings prefixed by their
// length, and bytes.
package binfile

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
)

// Once returns a function that parses data on its first call and returns
// the same result from then on. It panics if parse fails: the embedded
// files are generated and tested.
func Once[T any](parse func(data string) (T, error), data string) func() T {
	return sync.OnceValue(func() T {
		v, err := parse(data)
		if err != nil {
			panic(err)
		}
		return v
	})
}

// Reader reads a file from its start. Its strings are slices of the file.
type Reader struct {
	name string // of the format, to begin every error: "lexicon: truncated"
	rest string // what is left to read
}

// NewReader returns a Reader past data's first line, which must be magic
// ("cxlex1\n"). name begins every error.
func NewReader(name, magic, data string) (*Reader, error) {
	if !strings.HasPrefix(data, magic) {
		return nil, fmt.Errorf("%s: bad header", name)
	}
	return &Reader{name: name, rest: data[len(magic):]}, nil
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() (uint64, error) {
	v, n := binary.Uvarint([]byte(r.rest[:min(len(r.rest), binary.MaxVarintLen64)]))
	if n <= 0 {
		return 0, fmt.Errorf("%s: truncated", r.name)
	}
	r.rest = r.rest[n:]
	return v, nil
}

// String reads a string prefixed by its length as a Uvarint. what names
// it in the error: "lexicon: truncated string".
func (r *Reader) String(what string) (string, error) {
	l, err := r.Uvarint()
	if err != nil || l > uint64(len(r.rest)) {
		return "", fmt.Errorf("%s: truncated %s", r.name, what)
	}
	s := r.rest[:l]
	r.rest = r.rest[l:]
	return s, nil
}

// Byte reads one byte; there must be one left (see Len).
func (r *Reader) Byte() byte {
	b := r.rest[0]
	r.rest = r.rest[1:]
	return b
}

// Len is the number of bytes left.
func (r *Reader) Len() int { return len(r.rest) }

// Rest reads all that is left.
func (r *Reader) Rest() string {
	s := r.rest
	r.rest = ""
	return s
}
