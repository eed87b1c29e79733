package sandbox_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/lease"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
)

// store keeps the checkpoints a sandbox's committer saves.
type store struct {
	mu     sync.Mutex
	saved  []*channel.Checkpoint
	chunks map[string][]byte
	begun  int
	ended  chan struct{}
}

func newStore() *store { return &store{chunks: map[string][]byte{}, ended: make(chan struct{})} }

func (s *store) save(f *channel.Checkpoint, chunks map[string][]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saved = append(s.saved, f)
	maps.Copy(s.chunks, chunks)
	return f.Error == ""
}

// last waits for the n-th checkpoint saved and returns it.
func (s *store) last(t *testing.T, n int) *channel.Checkpoint {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		if len(s.saved) >= n {
			defer s.mu.Unlock()
			return s.saved[n-1]
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %d was not saved within 20 s", n)
		}
	}
}

// checkpoint asks for a checkpoint of at most limit bytes after an exec.
func (s *store) checkpoint(limit int64) *sandbox.Checkpoint {
	return &sandbox.Checkpoint{Bytes: limit, Begin: func() { s.mu.Lock(); s.begun++; s.mu.Unlock() }, Cancel: func() {}}
}

// A checkpoint taken after an exec reaches the committer whole, and
// restores the session into a fresh sandbox: values by pickle, functions
// by their source.
func TestCheckpointRestoresIntoAFreshSandbox(t *testing.T) {
	t.Parallel()
	sb, st := start(t), newStore()
	go sb.Checkpoints(1<<20, st.save, func() { close(st.ended) })
	res, _ := exec(t, sb, "x = 41\ndef inc(v):\n    return v + 1\n", sandbox.Exec{Checkpoint: st.checkpoint(1 << 20)})
	if res.Status != sandbox.StatusOK {
		t.Fatalf("the exec: %v %q", res.Status, res.Error)
	}
	f := st.last(t, 1)
	if f.Error != "" || len(f.Manifest) == 0 || st.begun != 1 {
		t.Fatalf("checkpoint: error %q, manifest %s, begun %d; want one stored", f.Error, f.Manifest, st.begun)
	}
	sb.Kill()
	select {
	case <-st.ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the committer did not end with its sandbox")
	}
	if !sb.WaitCommitter(time.Second) {
		t.Error("WaitCommitter: the committer has not returned")
	}

	fresh := start(t)
	got, _, err := fresh.Restore(t.Context(), sandbox.Restore{
		Manifest: f.Manifest, IDs: lease.ChunkIDs(f.Manifest), Chunks: st.chunks,
		Env: &sandbox.ExecEnv{}, Calls: &caller{}, Deadline: time.Now().Add(20 * time.Second),
	})
	if err != nil || got.Report.Error != "" {
		t.Fatalf("Restore: %v (%+v)", err, got)
	}
	if names := got.Report.Restored; !slices.Contains(names, "x") || !slices.Contains(names, "inc") {
		t.Errorf("restored %v, want x and inc", names)
	}
	if res, out := exec(t, fresh, "print(inc(x))", sandbox.Exec{}); out.stdout.String() != "42\n" {
		t.Errorf("after the restore: %q (%v %q)", out.stdout.String(), res.Status, res.Error)
	}
}

// A state over the cap is refused by the agent: the committer saves the
// refusal, and the reader has noted it for the next result to report.
func TestCheckpointOverTheCapIsRefused(t *testing.T) {
	t.Parallel()
	sb, st := start(t), newStore()
	go sb.Checkpoints(64<<10, st.save, func() {})
	exec(t, sb, "big = bytes(1 << 20)", sandbox.Exec{Checkpoint: st.checkpoint(64 << 10)})
	f := st.last(t, 1)
	if !strings.Contains(f.Error, "big") {
		t.Fatalf("checkpoint error %q, want the agent's refusal naming big", f.Error)
	}
	if why := sb.TakeRefused(); why != f.Error {
		t.Errorf("TakeRefused = %q, want %q", why, f.Error)
	}
	if why := sb.TakeRefused(); why != "" {
		t.Errorf("TakeRefused again = %q, want it said once", why)
	}
	if !sb.SupersededBy(f.Exec-1) || sb.SupersededBy(f.Exec) {
		t.Errorf("SupersededBy: a verdict on exec %d is older news than the refusal after it, and that one's is not", f.Exec-1)
	}
}

// Checkpoint frames that code in the sandbox writes to the agent's
// channel while its exec runs never reach the committer: only the
// agent's, after the exec's done, does.
func TestForgedCheckpointFramesAreDropped(t *testing.T) {
	t.Parallel()
	sb, st := start(t), newStore()
	go sb.Checkpoints(1<<20, st.save, func() {})
	forge := `import gc, codeexec_channel
ch = [o for o in gc.get_objects() if isinstance(o, codeexec_channel.Channel)][0]
for i in range(3):
    ch.send({"t": "checkpoint", "id": ch.exec_id, "last": True, "manifest": {"v": 1, "values": {}}})
x = 1`
	if res, _ := exec(t, sb, forge, sandbox.Exec{Checkpoint: st.checkpoint(1 << 20)}); res.Status != sandbox.StatusOK {
		t.Fatalf("the forging exec: %v %q", res.Status, res.Error)
	}
	f := st.last(t, 1)
	exec(t, sb, "pass", sandbox.Exec{})
	var m struct {
		Values map[string]json.RawMessage `json:"values"`
	}
	if err := json.Unmarshal(f.Manifest, &m); err != nil || m.Values["x"] == nil {
		t.Errorf("the checkpoint saved has manifest %s (%v), want the agent's, holding x", f.Manifest, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.saved) != 1 {
		t.Errorf("the committer got %d checkpoints, want the agent's one", len(st.saved))
	}
}
