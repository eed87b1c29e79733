package gateway

import (
	"crypto/rand"
	"encoding/hex"
)

// randomID returns 16 random hex digits.
func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
