package memoryd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
)

func TestMemoryQuotas(t *testing.T) {
	t.Parallel()
	eachStore(t, testMemoryQuotas)
}

// A tenant at its memory quota is refused a new key or more bytes, with a
// message that names the quota and what to do, and a metric counts the
// refusal; overwrites and deletes still work, and another tenant is not
// affected.
func testMemoryQuotas(t *testing.T, cfg memoryd.Config) {
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	cfg.Quotas = memoryd.Quotas{MemoryKeys: 3, MemoryBytes: 100}
	e := start(t, cfg)
	ctx := t.Context()
	save := func(tenant, key, value string) error {
		_, err := e.mem.SaveMemory(ctx, &memoryv1.SaveMemoryRequest{Tenant: tenant, Key: key, ValueJson: value})
		return err
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := save("t", k, `"x"`); err != nil {
			t.Fatal(err)
		}
	}
	err := save("t", "d", `"x"`)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "holds 3 keys") || !strings.Contains(err.Error(), "--quota-memory-keys") {
		t.Fatalf("a fourth key: %v; want ResourceExhausted naming the keys quota", err)
	}
	if err := save("t", "a", `"overwritten"`); err != nil {
		t.Fatalf("overwriting a key at the keys quota: %v", err)
	}
	if err := save("other", "d", `"x"`); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	// 3 keys of 1 byte, values and {} metadata: "a" 1+13+2, "b" and "c"
	// 1+3+2 each: 28 bytes. 100 - 28 + 6 leaves 78 for b's new value.
	err = save("t", "b", `"`+strings.Repeat("y", 77)+`"`)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--quota-memory-bytes") {
		t.Fatalf("a value past the bytes quota: %v; want ResourceExhausted naming the bytes quota", err)
	}
	if _, err := e.mem.UpdateMemory(ctx, &memoryv1.UpdateMemoryRequest{Tenant: "t", Key: "c", ValueJson: `"` + strings.Repeat("y", 77) + `"`, ExpectedRevision: 1}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("an update past the bytes quota: %v; want ResourceExhausted", err)
	}
	if err := save("t", "b", `"`+strings.Repeat("y", 70)+`"`); err != nil {
		t.Fatalf("a value within the bytes quota: %v", err)
	}
	if _, err := e.mem.DeleteMemory(ctx, &memoryv1.DeleteMemoryRequest{Tenant: "t", Key: "c"}); err != nil {
		t.Fatal(err)
	}
	if err := save("t", "d", `"x"`); err != nil {
		t.Fatalf("a new key after a delete: %v", err)
	}
	got := gather(t, reg)["codeexec_memoryd_quota_refusals_total"]
	counts := map[string]float64{}
	for _, m := range got.GetMetric() {
		counts[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	if want := map[string]float64{"memory_keys": 1, "memory_bytes": 2, "checkpoint_bytes": 0}; !equalCounts(counts, want) {
		t.Errorf("quota refusals %v, want %v", counts, want)
	}
}

func equalCounts(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestCheckpointQuota(t *testing.T) {
	t.Parallel()
	eachStore(t, testCheckpointQuota)
}

// A commit that would take the tenant's checkpoints together past its
// quota is refused as over a cap (InvalidArgument, as for one over its own
// cap), naming the quota; a commit that shrinks a session, and another
// tenant's, go through.
func testCheckpointQuota(t *testing.T, cfg memoryd.Config) {
	cfg.Quotas = memoryd.Quotas{CheckpointBytes: 2500}
	e := start(t, cfg)
	s := sessionstorev1.NewSessionStoreServiceClient(e.conn)
	ctx := t.Context()
	later := timestamppb.New(time.Now().Add(time.Hour))
	commit := func(tenant, handle string, ids ...string) error {
		t.Helper()
		resp, err := s.GetSession(ctx, &sessionstorev1.GetSessionRequest{Tenant: tenant, Handle: handle})
		rev := uint64(0)
		switch status.Code(err) {
		case codes.OK:
			rev = resp.GetSession().GetRevision()
		case codes.NotFound:
			r, err := s.PutSession(ctx, &sessionstorev1.PutSessionRequest{Tenant: tenant, Handle: handle, ExpireTime: later})
			if err != nil {
				t.Fatal(err)
			}
			rev = r.GetSession().GetRevision()
		default:
			t.Fatal(err)
		}
		var chunks []*sessionstorev1.Chunk
		for _, id := range ids {
			chunks = append(chunks, &sessionstorev1.Chunk{Id: id, Data: make([]byte, 1000)})
		}
		if _, err := s.PutChunks(ctx, &sessionstorev1.PutChunksRequest{Tenant: tenant, Handle: handle, Chunks: chunks}); err != nil {
			t.Fatal(err)
		}
		_, err = s.PutSession(ctx, &sessionstorev1.PutSessionRequest{Tenant: tenant, Handle: handle, ExpireTime: later, ExpectedRevision: rev,
			Chunks: &sessionstorev1.SessionChunks{Ids: ids}})
		return err
	}
	if err := commit("t", "one", "a", "b"); err != nil {
		t.Fatal(err)
	}
	err := commit("t", "two", "c")
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "--quota-checkpoint-bytes") {
		t.Fatalf("a second session's checkpoint past the tenant's quota: %v; want InvalidArgument naming the checkpoint quota", err)
	}
	if err := commit("other", "two", "c"); err != nil {
		t.Fatalf("another tenant's checkpoint: %v", err)
	}
	if err := commit("t", "one", "a"); err != nil {
		t.Fatalf("a checkpoint that shrinks its session: %v", err)
	}
	if err := commit("t", "two", "c"); err != nil {
		t.Fatalf("a checkpoint within the quota once another shrank: %v", err)
	}
}
