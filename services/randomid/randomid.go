// Package randomid makes the random IDs that name requests, sessions,
// sandboxes and sockets: bytes from crypto/rand written as lowercase hex,
// so that every such ID is unguessable and safe in a path, a label or a
// log line.
package randomid

import (
	"crypto/rand"
	"encoding/hex"
)

// Hex returns n random bytes from crypto/rand as 2n lowercase hex digits.
func Hex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails: crypto/rand.Read crashes the program instead
	return hex.EncodeToString(b)
}
