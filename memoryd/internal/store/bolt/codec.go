package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

// codecVersion is the first byte of every encoded record. A future layout
// gets a new version so that old files stay readable.
const codecVersion = 1

// encode lays a record out as: version, uvarint revision, varint created
// and updated (Unix nanoseconds), uvarint len(meta), meta, value. Value and
// meta are stored byte for byte, so JSON text round-trips exactly.
func encode(r store.Record) []byte {
	buf := make([]byte, 0, 1+3*binary.MaxVarintLen64+binary.MaxVarintLen64+len(r.Meta)+len(r.Value))
	buf = append(buf, codecVersion)
	buf = binary.AppendUvarint(buf, r.Revision)
	buf = binary.AppendVarint(buf, r.Created.UnixNano())
	buf = binary.AppendVarint(buf, r.Updated.UnixNano())
	buf = binary.AppendUvarint(buf, uint64(len(r.Meta)))
	buf = append(buf, r.Meta...)
	buf = append(buf, r.Value...)
	return buf
}

var errCorrupt = errors.New("corrupt record")

// decode parses what encode wrote. The returned slices are copies, because
// bbolt's memory is valid only inside its transaction.
func decode(key string, b []byte, withValue bool) (store.Record, error) {
	if len(b) == 0 || b[0] != codecVersion {
		return store.Record{}, fmt.Errorf("%w %q: unknown version", errCorrupt, key)
	}
	b = b[1:]
	rev, n := binary.Uvarint(b)
	if n <= 0 {
		return store.Record{}, fmt.Errorf("%w %q: revision", errCorrupt, key)
	}
	b = b[n:]
	created, n := binary.Varint(b)
	if n <= 0 {
		return store.Record{}, fmt.Errorf("%w %q: created", errCorrupt, key)
	}
	b = b[n:]
	updated, n := binary.Varint(b)
	if n <= 0 {
		return store.Record{}, fmt.Errorf("%w %q: updated", errCorrupt, key)
	}
	b = b[n:]
	metaLen, n := binary.Uvarint(b)
	if n <= 0 || metaLen > uint64(len(b)-n) {
		return store.Record{}, fmt.Errorf("%w %q: metadata", errCorrupt, key)
	}
	b = b[n:]
	r := store.Record{
		Key:      key,
		Meta:     append([]byte{}, b[:metaLen]...),
		ValueLen: len(b) - int(metaLen),
		Created:  time.Unix(0, created).UTC(),
		Updated:  time.Unix(0, updated).UTC(),
		Revision: rev,
	}
	if withValue {
		r.Value = append([]byte{}, b[metaLen:]...)
	}
	return r, nil
}
