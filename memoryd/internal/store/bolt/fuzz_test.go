package bolt

import (
	"bytes"
	"testing"
	"time"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

// FuzzDecode reads arbitrary bytes as a stored record and as a request
// outcome: a corrupt file must give an error, never a panic or a record
// whose lengths do not add up; and what decode accepts encodes to bytes
// that decode to the same record (varints may be written shorter).
func FuzzDecode(f *testing.F) {
	f.Add(encode(store.Record{Key: "k", Value: []byte(`{"a":1}`), Meta: []byte("{}"), Created: time.Unix(1, 2), Updated: time.Unix(3, 4), Revision: 5}))
	f.Add([]byte{codecVersion, 1, 2, 2, 200})
	f.Add(encodeOutcome(store.Outcome{Op: store.OutcomeDelete, Tenant: "t", Kind: store.KindMemory, Key: "k", Deleted: true}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if rec, err := decode("k", b, true); err == nil {
			if rec.ValueLen != len(rec.Value) {
				t.Errorf("ValueLen %d for a %d-byte value", rec.ValueLen, len(rec.Value))
			}
			again, err := decode("k", encode(rec), true)
			if err != nil || !bytes.Equal(again.Value, rec.Value) || !bytes.Equal(again.Meta, rec.Meta) ||
				again.Revision != rec.Revision || !again.Created.Equal(rec.Created) || !again.Updated.Equal(rec.Updated) {
				t.Errorf("encode then decode changed the record %x: %+v, %v", b, again, err)
			}
		}
		if o, err := decodeOutcome(b); err == nil && o.Op != store.OutcomePut && o.Op != store.OutcomeDelete {
			t.Errorf("outcome of kind %d", o.Op)
		}
	})
}
