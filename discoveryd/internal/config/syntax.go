package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
	"github.com/tailscale/hujson"
)

// decodeJSON parses JSON with comments and trailing commas, as VS Code
// writes it. An error names the line and column in the file as the user
// sees it, since ~/.claude.json can run to thousands of lines.
func decodeJSON(data []byte) (any, error) {
	std, err := stripJSONC(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(std))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, jsonError(data, err)
	}
	return v, nil
}

// stripJSONC turns VS Code's JSON with comments into JSON: comments and
// trailing commas become spaces, so offsets in the result are offsets in
// in. Input that is not valid JSONC (trailing data included, which a JSON
// decoder would pass over) is returned unchanged with an error naming the
// line and column.
func stripJSONC(in []byte) ([]byte, error) {
	// hujson wants a line comment to end with a newline; a file whose last
	// line is a comment may have none.
	out, err := hujson.Standardize(append(bytes.Clone(in), '\n'))
	if err == nil {
		return out[:len(in)], nil
	}
	m := hujsonPos.FindStringSubmatch(err.Error())
	if m == nil {
		return in, nil // for the JSON decoder to report
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2]) // in bytes, from 1
	off := 0
	for ; line > 1 && off < len(in); line-- {
		nl := bytes.IndexByte(in[off:], '\n')
		if nl < 0 {
			off = len(in)
			break
		}
		off += nl + 1
	}
	return in, fmt.Errorf("invalid JSON at %s: %s", position(in, off+col-1), m[3])
}

// hujsonPos splits hujson's "hujson: line 3, column 5: reason" error.
var hujsonPos = regexp.MustCompile(`(?s)^hujson: line (\d+), column (\d+): (.*)$`)

// jsonError adds the line and column to an error of encoding/json, from
// the offset it reports.
func jsonError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		// Offset counts the byte that was wrong.
		return fmt.Errorf("invalid JSON at %s: %w", position(data, int(se.Offset)-1), err)
	case errors.As(err, &te):
		return fmt.Errorf("invalid JSON at %s: %w", position(data, int(te.Offset)), err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("invalid JSON at %s: the file ends before the value does", position(data, len(data)))
	}
	return fmt.Errorf("invalid JSON: %w", err)
}

// tomlError adds the line and column that the TOML parser reports.
func tomlError(err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("invalid TOML at line %d, column %d: %s", pe.Position.Line, pe.Position.Col, pe.Message)
	}
	return fmt.Errorf("invalid TOML: %w", err)
}

// position is "line L, column C" of byte offset off in data, both from 1,
// the column in characters as editors count them.
func position(data []byte, off int) string {
	off = max(0, min(off, len(data)))
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	return fmt.Sprintf("line %d, column %d", 1+bytes.Count(data[:start], []byte{'\n'}), 1+utf8.RuneCount(data[start:off]))
}
