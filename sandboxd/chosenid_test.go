package sandboxd_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// A session may be created with an ID its caller chose (the gateway
// derives one from an MCP session): once it exists, live or only in the
// store, creating it again is ALREADY_EXISTS and leaves it as it is, so
// the caller continues it, restored from its checkpoint on another
// replica. Once destroyed, the ID starts an empty session.
func TestCreateWithChosenID(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	a := newReplica(t, store, "unix:/a.sock", nil)
	b := newReplica(t, store, "unix:/b.sock", nil)
	const id = "0123456789abcdef0123456789abcdef"
	createAs := func(c sandboxv1.SandboxServiceClient, tenant, id string) error {
		resp, err := c.CreateSession(t.Context(), &sandboxv1.CreateSessionRequest{Tenant: tenant, SessionId: id})
		if err == nil && resp.GetSession().GetId() != id {
			t.Errorf("CreateSession(%q) made session %q", id, resp.GetSession().GetId())
		}
		return err
	}
	if err := createAs(a.c, "alice", id); err != nil {
		t.Fatal(err)
	}
	run(t, a.c, id, setupState)

	for _, tc := range []struct {
		name, tenant, id string
		c                sandboxv1.SandboxServiceClient
		want             codes.Code
	}{
		{"again where it is live", "alice", id, a.c, codes.AlreadyExists},
		{"again on another replica", "alice", id, b.c, codes.AlreadyExists},
		{"by another tenant where it is live", "mallory", id, a.c, codes.AlreadyExists},
		{"too short", "alice", "0123", a.c, codes.InvalidArgument},
		{"upper case", "alice", strings.ToUpper(id), a.c, codes.InvalidArgument},
		{"not hex", "alice", strings.Repeat("g", 32), a.c, codes.InvalidArgument},
	} {
		if err := createAs(tc.c, tc.tenant, tc.id); status.Code(err) != tc.want {
			t.Errorf("%s: CreateSession = %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := run(t, a.c, id, checkState); got.stdout != wantState {
		t.Errorf("after the refused creates: stdout %q (stderr %q)", got.stdout, got.stderr)
	}

	a.stop(t)
	if err := createAs(b.c, "alice", id); status.Code(err) != codes.AlreadyExists {
		t.Errorf("CreateSession of a session only in the store = %v, want ALREADY_EXISTS", err)
	}
	got := run(t, b.c, id, checkState)
	if got.stdout != wantState {
		t.Fatalf("continued on replica b: stdout %q (stderr %q)", got.stdout, got.stderr)
	}
	wantRestored(t, got.result, "stopped", false)

	if _, err := b.c.DestroySession(t.Context(), &sandboxv1.DestroySessionRequest{SessionId: id, Tenant: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := createAs(b.c, "alice", id); err != nil {
		t.Fatalf("CreateSession after DestroySession: %v", err)
	}
	if got := run(t, b.c, id, "print('x' in globals())"); got.stdout != "False\n" || got.result.GetRestored() != nil {
		t.Errorf("the destroyed session's ID: stdout %q, restored %v; want an empty session", got.stdout, got.result.GetRestored())
	}
}

// Without a session store a chosen ID is kept too, while its session
// lives.
func TestCreateWithChosenIDNotDurable(t *testing.T) {
	t.Parallel()
	r := newReplica(t, nil, "unix:/a.sock", nil)
	const id = "fedcba9876543210fedcba9876543210"
	for i, want := range []codes.Code{codes.OK, codes.AlreadyExists} {
		if _, err := r.c.CreateSession(t.Context(), &sandboxv1.CreateSessionRequest{Tenant: "alice", SessionId: id}); status.Code(err) != want {
			t.Errorf("CreateSession %d = %v, want %v", i, err, want)
		}
	}
	if got := run(t, r.c, id, "print(1)"); got.stdout != "1\n" {
		t.Errorf("stdout %q (stderr %q)", got.stdout, got.stderr)
	}
}
