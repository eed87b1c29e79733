package sandboxd_test

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/codeexec/codeexec/memoryd"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/grpctest"
)

// forgeInExec is the security report's code, smaller: it reaches the
// agent's channel and sends checkpoint frames of its own while it runs,
// each with 2 MiB of chunks that no manifest names.
const forgeInExec = `import gc, os, time, codeexec_channel
ch = [o for o in gc.get_objects() if isinstance(o, codeexec_channel.Channel)][0]
ch.on_checkpointed = lambda m: None
data = os.urandom(2 << 20)
for i in range(12):
    ch.send_blobs({"t": "checkpoint", "id": ch.exec_id, "last": True, "manifest": {"values": {}}}, [('junk%03d' % i, data)])
    time.sleep(0.05)
`

// forgeAfterDone defines forge(i), which ends its exec with a done frame
// of its own, so that the checkpoint it sends next comes when one is due,
// and names every chunk the calls before it sent: 2 MiB more each time.
const forgeAfterDone = `import gc, hashlib, os, codeexec_channel
ch = [o for o in gc.get_objects() if isinstance(o, codeexec_channel.Channel)][0]
base, forged = os.urandom(2 << 20), {}
def forge(i):
    d = base + i.to_bytes(8, "big")
    cid = hashlib.blake2b(d, digest_size=16).hexdigest()
    forged["j%d" % i] = {"chunk": cid, "bytes": len(d)}
    ch.send({"t": "done", "id": ch.exec_id, "ok": True, "exit": 0})
    ch.send_blobs({"t": "checkpoint", "id": ch.exec_id, "last": True, "manifest": {"v": 1, "values": dict(forged)}}, [(cid, d)])
`

// Code in the sandbox can write checkpoint frames of its own. Whatever it
// sends, while an exec runs or after it, the store holds no more than the
// checkpoint cap for its session.
func TestForgedCheckpointsStayWithinTheCap(t *testing.T) {
	t.Parallel()
	const limit = 4 << 20
	path := filepath.Join(t.TempDir(), "memory.db")
	svc, err := memoryd.New(memoryd.Config{Path: path}, nil)
	if err != nil {
		t.Fatalf("memoryd.New: %v", err)
	}
	var closeOnce sync.Once
	closeStore := func() {
		closeOnce.Do(func() {
			if err := svc.Close(); err != nil {
				t.Errorf("memoryd Close: %v", err)
			}
		})
	}
	t.Cleanup(closeStore)
	counter := &countingStore{}
	// The store holds a session to the two caps together: its values' and
	// its workspace files'.
	r := newReplicaWrapped(t, grpctest.Start(t, svc.Register), "unix:/r1.sock", func(c *sandboxd.Config) {
		c.CheckpointBytes, c.WorkspaceCheckpointBytes = limit-(1<<20), 1<<20
	},
		func(c sessionstorev1.SessionStoreServiceClient) sessionstorev1.SessionStoreServiceClient {
			counter.SessionStoreServiceClient = c
			return counter
		})
	id := create(t, r.c, "alice")
	run(t, r.c, id, "keep = bytes(1 << 20)")
	// The frames sent while the exec runs are dropped: its checkpoint is
	// the agent's alone, taken after its done. So the first three execs
	// are three commits at most, one per exec, each with the number of
	// execs it reflects. A forged frame stored would be one more, with the
	// number of the exec in flight, or none (0) once that exec's was in.
	// They are counted once the replica has stopped, when every commit
	// has landed: counted between calls, the last call's commit may still
	// be on its way.
	if res := run(t, r.c, id, forgeInExec); res.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK {
		t.Fatalf("the forging exec: %v (stderr %q)", res.result, res.stderr)
	}
	run(t, r.c, id, "del data")
	run(t, r.c, id, forgeAfterDone)
	for i := range 8 {
		run(t, r.c, id, fmt.Sprintf("forge(%d)", i))
	}
	// Stopped, the replica has stored every checkpoint it took; closed,
	// memoryd lets the file be read.
	r.stop(t)
	closeStore()
	var first []uint64
	for _, seq := range counter.committed() {
		if seq <= 3 {
			first = append(first, seq)
		}
	}
	if len(first) > 3 {
		t.Errorf("three execs, one sending 12 checkpoint frames of its own, made %d commits reflecting them (execs reflected: %v); want 3 at most, one per exec", len(first), first)
	}
	held := sessionChunkBytes(t, path, "alice", id)
	t.Logf("the store holds %d bytes of chunks for the session", held)
	if held > limit {
		t.Errorf("the store holds %d bytes of chunks for the session, over the %d-byte checkpoint cap", held, limit)
	}
}

// sessionChunkBytes counts the bytes of a session's chunks in the bbolt
// file at path (tenants/<tenant>/chunks/<handle>/<id>).
func sessionChunkBytes(t *testing.T, path, tenant, handle string) int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	defer db.Close()
	n := 0
	err = db.View(func(tx *bolt.Tx) error {
		tb := tx.Bucket([]byte("tenants"))
		if tb != nil {
			tb = tb.Bucket([]byte(tenant))
		}
		if tb == nil {
			return nil
		}
		return tb.ForEachBucket(func(kind []byte) error {
			if !strings.HasPrefix(string(kind), "chunks/") {
				return nil
			}
			if string(kind) != "chunks/"+handle {
				t.Errorf("the store holds chunks of another session, %s", kind)
			}
			return tb.Bucket(kind).ForEach(func(k, v []byte) error {
				size, ok := chunkValueBytes(v)
				if !ok {
					t.Errorf("chunk record %s does not decode", k)
				}
				n += size
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// chunkValueBytes is the length of the value in a record as memoryd's
// store encodes it: a version byte, the revision, created and updated
// times as varints, the meta's length and the meta, then the value.
func chunkValueBytes(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	b = b[1:]
	for range 3 {
		_, w := binary.Varint(b)
		if w <= 0 {
			return 0, false
		}
		b = b[w:]
	}
	meta, w := binary.Uvarint(b)
	if w <= 0 || meta > uint64(len(b)-w) {
		return 0, false
	}
	return len(b) - w - int(meta), true
}
