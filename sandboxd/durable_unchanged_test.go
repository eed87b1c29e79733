package sandboxd_test

import (
	"strings"
	"testing"
	"time"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
)

// A call that changes nothing the checkpoint holds (its variables, its
// workspace files) writes nothing to the store: its checkpoint equals the
// stored one. A call that changes something is written as before, and a
// restore after a kill counts the unwritten calls as held, not missed.
func TestUnchangedCheckpointsAreNotWritten(t *testing.T) {
	t.Parallel()
	counter := &countingStore{}
	r := newReplicaWrapped(t, sessionStore(t), "unix:/unchanged.sock", nil, func(c sessionstorev1.SessionStoreServiceClient) sessionstorev1.SessionStoreServiceClient {
		counter.SessionStoreServiceClient = c
		return counter
	})
	resp, err := r.c.CreateSession(t.Context(), &sandboxv1.CreateSessionRequest{Tenant: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetSession().GetId()
	run(t, r.c, id, "x = 1\nopen('f.txt', 'w').write('a');")
	run(t, r.c, id, "print(x)") // waits for the first call's checkpoint
	settle := func() int {
		// The last call's checkpoint is stored, or skipped, well within this.
		time.Sleep(300 * time.Millisecond)
		return len(counter.committed())
	}
	before := settle()
	for range 5 {
		if got := run(t, r.c, id, "print(x, open('f.txt').read())").stdout; got != "1 a\n" {
			t.Fatalf("stdout %q", got)
		}
	}
	if n := settle(); n != before {
		t.Errorf("calls that changed nothing wrote %d checkpoints", n-before)
	}
	run(t, r.c, id, "open('f.txt', 'w').write('b');")
	if n := settle(); n != before+1 {
		t.Errorf("a call that changed a file wrote %d checkpoints, want 1", n-before)
	}
	run(t, r.c, id, "print(x)")
	run(t, r.c, id, "print(x)")
	res, _ := execute(t.Context(), r.c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"})
	if res == nil || res.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_KILLED {
		t.Fatalf("the kill: %v", res)
	}
	after := run(t, r.c, id, "print(x, open('f.txt').read())")
	rep := after.result.GetRestored()
	if after.stdout != "1 b\n" || rep == nil || rep.GetMissed() != 0 || !strings.Contains(strings.Join(rep.GetFiles(), " "), "/workspace/f.txt") {
		t.Errorf("after the kill: %q, report %v", after.stdout, rep)
	}
}
