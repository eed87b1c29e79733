package memoryd_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/memoryd"
	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
)

func TestSessionRecordsCompareAndSwap(t *testing.T) {
	t.Parallel()
	eachStore(t, testSessionRecordsCompareAndSwap)
}

func testSessionRecordsCompareAndSwap(t *testing.T, cfg memoryd.Config) {
	e := start(t, cfg)
	s := sessionstorev1.NewSessionStoreServiceClient(e.conn)
	ctx := t.Context()
	later := timestamppb.New(time.Now().Add(time.Hour))
	put := func(handle, state string, expected uint64) (*sessionstorev1.SessionRecord, error) {
		resp, err := s.PutSession(ctx, &sessionstorev1.PutSessionRequest{Tenant: "a", Handle: handle, State: []byte(state), ExpireTime: later, ExpectedRevision: expected})
		return resp.GetSession(), err
	}
	first, err := put("h1", "v1", 0)
	if err != nil || first.GetRevision() != 1 {
		t.Fatalf("create: %v, %v", first, err)
	}
	// A second create, or a write from a stale revision, is refused.
	for _, expected := range []uint64{0, 7} {
		if _, err := put("h1", "other", expected); status.Code(err) != codes.Aborted {
			t.Errorf("write expecting revision %d: %v, want ABORTED", expected, err)
		}
	}
	second, err := put("h1", "v2", 1)
	if err != nil || second.GetRevision() != 2 {
		t.Fatalf("update: %v, %v", second, err)
	}
	got, err := s.GetSession(ctx, &sessionstorev1.GetSessionRequest{Tenant: "a", Handle: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(second, got.GetSession(), protocmp.Transform()); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	// Another tenant's handle and a random one get the same answer.
	var msgs []string
	for _, req := range []*sessionstorev1.GetSessionRequest{{Tenant: "b", Handle: "h1"}, {Tenant: "a", Handle: "nope"}} {
		_, err := s.GetSession(ctx, req)
		if status.Code(err) != codes.NotFound {
			t.Fatalf("GetSession(%v) = %v, want NotFound", req, err)
		}
		msgs = append(msgs, strings.ReplaceAll(status.Convert(err).Message(), req.GetHandle(), "H"))
	}
	if msgs[0] != msgs[1] {
		t.Errorf("another tenant's handle answers %q, an unknown one %q: they must not differ", msgs[0], msgs[1])
	}
	if _, err := put("x/y", "v", 0); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a handle with '/': %v", err)
	}
	if _, err := s.PutSession(ctx, &sessionstorev1.PutSessionRequest{Tenant: "a", Handle: "h2", State: []byte("v")}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("no expiry: %v", err)
	}
}

func TestSessionChunksAndExpiry(t *testing.T) {
	t.Parallel()
	eachStore(t, testSessionChunksAndExpiry)
}

func testSessionChunksAndExpiry(t *testing.T, cfg memoryd.Config) {
	e := start(t, cfg)
	s := sessionstorev1.NewSessionStoreServiceClient(e.conn)
	ctx := t.Context()
	chunks := []*sessionstorev1.Chunk{{Id: "c1", Data: []byte("one")}, {Id: "c2", Data: make([]byte, 3<<20)}, {Id: "c3", Data: nil}}
	// Chunks need their session's record.
	if _, err := s.PutChunks(ctx, &sessionstorev1.PutChunksRequest{Tenant: "t", Handle: "live", Chunks: chunks}); status.Code(err) != codes.NotFound {
		t.Fatalf("PutChunks before the session's record: %v, want NotFound", err)
	}
	revs := map[string]uint64{}
	for _, h := range []string{"live", "old"} {
		put, err := s.PutSession(ctx, &sessionstorev1.PutSessionRequest{Tenant: "t", Handle: h, ExpireTime: timestamppb.New(time.Now().Add(time.Hour))})
		if err != nil {
			t.Fatal(err)
		}
		revs[h] = put.GetSession().GetRevision()
		if _, err := s.PutChunks(ctx, &sessionstorev1.PutChunksRequest{Tenant: "t", Handle: h, Chunks: chunks}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PutSession(ctx, &sessionstorev1.PutSessionRequest{Tenant: "t", Handle: "old", ExpireTime: timestamppb.New(time.Now().Add(-time.Second)), ExpectedRevision: revs["old"]}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutChunks(ctx, &sessionstorev1.PutChunksRequest{Tenant: "t", Handle: "old", Chunks: chunks}); status.Code(err) != codes.NotFound {
		t.Errorf("PutChunks for an expired session: %v, want NotFound", err)
	}
	ids := func(h string, want ...string) ([]*sessionstorev1.Chunk, error) {
		stream, err := s.GetChunks(ctx, &sessionstorev1.GetChunksRequest{Tenant: "t", Handle: h, Ids: want})
		if err != nil {
			return nil, err
		}
		var out []*sessionstorev1.Chunk
		for {
			m, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return out, err
			}
			out = append(out, m.GetChunk())
		}
	}
	got, err := ids("live", "c3", "c1", "c2")
	if err != nil || len(got) != 3 || got[0].GetId() != "c3" || string(got[1].GetData()) != "one" || len(got[2].GetData()) != 3<<20 {
		t.Fatalf("GetChunks in the asked order: %d chunks, %v", len(got), err)
	}
	if del, err := s.DeleteChunks(ctx, &sessionstorev1.DeleteChunksRequest{Tenant: "t", Handle: "live", Ids: []string{"c1", "zz"}}); err != nil || del.GetDeleted() != 1 {
		t.Errorf("DeleteChunks: %v, %v", del, err)
	}
	if _, err := ids("live", "c1"); status.Code(err) != codes.NotFound {
		t.Errorf("a deleted chunk: %v", err)
	}
	// An expired session is unknown at once, and the sweep removes it
	// with its chunks; the live one stays.
	if _, err := s.GetSession(ctx, &sessionstorev1.GetSessionRequest{Tenant: "t", Handle: "old"}); status.Code(err) != codes.NotFound {
		t.Errorf("expired session: %v", err)
	}
	resp, err := s.ExpireSessions(ctx, &sessionstorev1.ExpireSessionsRequest{})
	if err != nil || resp.GetExpired() != 1 {
		t.Fatalf("ExpireSessions: %v, %v", resp, err)
	}
	if _, err := ids("old", "c1"); status.Code(err) != codes.NotFound {
		t.Errorf("chunks of an expired session survived the sweep: %v", err)
	}
	if _, err := ids("live", "c2"); err != nil {
		t.Errorf("the live session lost a chunk: %v", err)
	}
	if del, err := s.DeleteSession(ctx, &sessionstorev1.DeleteSessionRequest{Tenant: "t", Handle: "live"}); err != nil || !del.GetDeleted() {
		t.Errorf("DeleteSession: %v, %v", del, err)
	}
	if _, err := ids("live", "c2"); status.Code(err) != codes.NotFound {
		t.Errorf("chunks of a deleted session: %v", err)
	}
	if _, err := s.PutChunks(ctx, &sessionstorev1.PutChunksRequest{Tenant: "t", Handle: "live", Chunks: chunks}); status.Code(err) != codes.NotFound {
		t.Errorf("PutChunks after DeleteSession: %v, want NotFound", err)
	}
	big := []*sessionstorev1.Chunk{{Id: "huge", Data: make([]byte, 33<<20)}}
	if _, err := s.PutChunks(ctx, &sessionstorev1.PutChunksRequest{Tenant: "t", Handle: "h", Chunks: big}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a 33 MiB chunk: %v", err)
	}
}

func TestReplicaHeartbeats(t *testing.T) {
	t.Parallel()
	eachStore(t, testReplicaHeartbeats)
}

func testReplicaHeartbeats(t *testing.T, cfg memoryd.Config) {
	e := start(t, cfg)
	s := sessionstorev1.NewSessionStoreServiceClient(e.conn)
	r := &sessionstorev1.Replica{Id: "r1", Address: "unix:/tmp/x.sock", ExpireTime: timestamppb.New(time.Unix(100, 0)), Host: "h", Pid: 42, BootId: "b"}
	if _, err := s.PutReplica(t.Context(), &sessionstorev1.PutReplicaRequest{Replica: r}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetReplica(t.Context(), &sessionstorev1.GetReplicaRequest{Id: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, got.GetReplica(), protocmp.Transform()); diff != "" {
		t.Errorf("heartbeat (-want +got):\n%s", diff)
	}
	if _, err := s.GetReplica(t.Context(), &sessionstorev1.GetReplicaRequest{Id: "r2"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown replica: %v", err)
	}
}

func TestSessionCommitKeepsOnlyTheNamedChunks(t *testing.T) {
	t.Parallel()
	eachStore(t, testSessionCommitKeepsOnlyTheNamedChunks)
}

// A commit (a PutSession with chunks) leaves the session exactly the
// chunks its state names: those an older state named and those stored but
// never named go, unchanged ones stay, and a state naming more than the
// cap is refused with nothing deleted.
func testSessionCommitKeepsOnlyTheNamedChunks(t *testing.T, cfg memoryd.Config) {
	e := start(t, cfg)
	s := sessionstorev1.NewSessionStoreServiceClient(e.conn)
	ctx := t.Context()
	later := timestamppb.New(time.Now().Add(time.Hour))
	resp, err := s.PutSession(ctx, &sessionstorev1.PutSessionRequest{Tenant: "t", Handle: "h", ExpireTime: later})
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.GetSession().GetRevision()
	all := []string{"a", "b", "c", "d", "e"}
	held := func() []string {
		t.Helper()
		var out []string
		for _, id := range all {
			stream, err := s.GetChunks(ctx, &sessionstorev1.GetChunksRequest{Tenant: "t", Handle: "h", Ids: []string{id}})
			if err == nil {
				_, err = stream.Recv()
			}
			switch status.Code(err) {
			case codes.OK:
				out = append(out, id)
			case codes.NotFound:
			default:
				t.Fatalf("GetChunks(%s): %v", id, err)
			}
		}
		return out
	}
	putChunks := func(ids ...string) {
		t.Helper()
		var chunks []*sessionstorev1.Chunk
		for _, id := range ids {
			chunks = append(chunks, &sessionstorev1.Chunk{Id: id, Data: make([]byte, 1000)})
		}
		if _, err := s.PutChunks(ctx, &sessionstorev1.PutChunksRequest{Tenant: "t", Handle: "h", Chunks: chunks}); err != nil {
			t.Fatal(err)
		}
	}
	named := func(limit uint64, ids ...string) *sessionstorev1.SessionChunks {
		return &sessionstorev1.SessionChunks{Ids: ids, MaxBytes: limit}
	}
	for _, step := range []struct {
		name   string
		put    []string
		stale  bool // the commit expects the revision before the current one
		chunks *sessionstorev1.SessionChunks
		code   codes.Code
		want   []string
	}{
		{"a chunk stored but never named goes", []string{"a", "b", "c"}, false, named(2000, "a", "b"), codes.OK, []string{"a", "b"}},
		{"a chunk the older state named goes, an unchanged one stays", []string{"d"}, false, named(2000, "b", "d", "zz"), codes.OK, []string{"b", "d"}},
		{"a write without chunks leaves them", []string{"e"}, false, nil, codes.OK, []string{"b", "d", "e"}},
		{"a state naming more than the cap is refused", nil, false, named(2999, "b", "d", "e"), codes.InvalidArgument, []string{"b", "d", "e"}},
		{"a commit that lost the session deletes nothing", nil, true, named(0), codes.Aborted, []string{"b", "d", "e"}},
		{"a state naming none leaves none", nil, false, named(0), codes.OK, nil},
	} {
		if step.put != nil {
			putChunks(step.put...)
		}
		expected := rev
		if step.stale {
			expected--
		}
		resp, err := s.PutSession(ctx, &sessionstorev1.PutSessionRequest{Tenant: "t", Handle: "h", ExpireTime: later, ExpectedRevision: expected, Chunks: step.chunks})
		if status.Code(err) != step.code {
			t.Fatalf("%s: commit = %v, want %v", step.name, err, step.code)
		}
		if err == nil {
			rev = resp.GetSession().GetRevision()
		}
		if diff := cmp.Diff(step.want, held()); diff != "" {
			t.Errorf("%s: chunks held (-want +got):\n%s", step.name, diff)
		}
	}
}

// SessionStoreService was codeexec.memory.v1.SessionStoreService until it
// moved to a package of its own; a sandboxd of that release calls it by
// that name, and must still reach it.
func TestSessionStoreAnswersItsFormerName(t *testing.T) {
	t.Parallel()
	e := start(t, memoryd.Config{})
	later := timestamppb.New(time.Now().Add(time.Hour))
	put := &sessionstorev1.PutSessionRequest{Tenant: "a", Handle: "h1", State: []byte("v1"), ExpireTime: later}
	if _, err := sessionstorev1.NewSessionStoreServiceClient(e.conn).PutSession(t.Context(), put); err != nil {
		t.Fatal(err)
	}
	got := &sessionstorev1.GetSessionResponse{}
	err := e.conn.Invoke(t.Context(), "/codeexec.memory.v1.SessionStoreService/GetSession",
		&sessionstorev1.GetSessionRequest{Tenant: "a", Handle: "h1"}, got)
	if err != nil || string(got.GetSession().GetState()) != "v1" {
		t.Fatalf("GetSession by the former name: %v, %v", got, err)
	}
}
