package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/codeexec/codeexec/gateway"
)

// stateKeyName is the file, in serve's state directory, of the key that
// signs the requestState of input_required results: every codeexec
// process on the state dir shares it, so that a client's retry may come
// back through any of them.
const stateKeyName = "request-state.key"

// readStateKey reads the key in path; with create, a missing file is made
// with a new random key, readable by its owner alone. Two processes that
// start at once make it once: the loser of O_EXCL reads the winner's.
func readStateKey(path string, create bool) ([]byte, error) {
	for range 2 {
		b, err := os.ReadFile(path)
		if err == nil {
			key := bytes.TrimSpace(b)
			if len(key) < gateway.MinStateKeyBytes {
				return nil, fmt.Errorf("request state key %s holds %d bytes; it must hold at least %d (any secret, e.g. from: head -c 32 /dev/urandom | xxd -p -c 64)", path, len(key), gateway.MinStateKeyBytes)
			}
			return key, nil
		}
		if !create || !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("request state key: %w", err)
		}
		if err := writeStateKey(path); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("request state key: %w", err)
		}
	}
	return nil, fmt.Errorf("request state key %s: made, but cannot be read back", path)
}

func writeStateKey(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	// Written aside and linked in, so that no reader sees it half made.
	tmp, err := os.CreateTemp(filepath.Dir(path), stateKeyName+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.WriteString(hex.EncodeToString(randomKey()) + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Link(tmp.Name(), path)
}

func randomKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // never fails (crypto/rand, Go 1.24+)
	return k
}
