package sandboxd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
	"github.com/codeexec/codeexec/sandboxd"
)

// countingStore counts the bytes a replica stores, chunks and records,
// and keeps the sequence number of each checkpoint it commits.
type countingStore struct {
	sessionstorev1.SessionStoreServiceClient
	chunks, records atomic.Int64

	mu      sync.Mutex
	commits []uint64
}

// committed returns the sequence numbers of the checkpoints committed so
// far (a record written with its chunks), in the order they were sent.
func (c *countingStore) committed() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.commits)
}

func (c *countingStore) PutChunks(ctx context.Context, in *sessionstorev1.PutChunksRequest, opts ...grpc.CallOption) (*sessionstorev1.PutChunksResponse, error) {
	for _, ch := range in.GetChunks() {
		c.chunks.Add(int64(len(ch.GetData())))
	}
	return c.SessionStoreServiceClient.PutChunks(ctx, in, opts...)
}

func (c *countingStore) PutSession(ctx context.Context, in *sessionstorev1.PutSessionRequest, opts ...grpc.CallOption) (*sessionstorev1.PutSessionResponse, error) {
	c.records.Add(int64(len(in.GetState())))
	if in.GetChunks() != nil {
		var st struct {
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal(in.GetState(), &st); err != nil {
			return nil, fmt.Errorf("the test's store could not read the session record: %w", err)
		}
		c.mu.Lock()
		c.commits = append(c.commits, st.Seq)
		c.mu.Unlock()
	}
	return c.SessionStoreServiceClient.PutSession(ctx, in, opts...)
}

func mustRun(b *testing.B, c sandboxv1.SandboxServiceClient, id, code string) *execResult {
	b.Helper()
	r, err := execute(b.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: code, Timeout: durationpb.New(60 * time.Second)})
	if err != nil || r.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK {
		b.Fatalf("Execute(%q): %v %v %s", code, err, r.result, r.stderr)
	}
	return r
}

func mustCreate(b *testing.B, c sandboxv1.SandboxServiceClient) string {
	b.Helper()
	resp, err := c.CreateSession(b.Context(), &sandboxv1.CreateSessionRequest{Tenant: "alice"})
	if err != nil {
		b.Fatal(err)
	}
	return resp.GetSession().GetId()
}

// BenchmarkWarmRoundTrip times one exec in a live session, with sessions
// durable (a checkpoint after each exec) and not (no session store), for
// an empty namespace, one holding 10 MiB that does not change, and one
// whose 10 MiB changes in every call. bytes/ckpt is what each exec's
// checkpoint stored: chunks plus the session record.
func BenchmarkWarmRoundTrip(b *testing.B) {
	states := []struct{ name, setup, code string }{
		{"empty", "", "pass"},
		{"10MiB unchanged", "blob = bytes(10 << 20)", "pass"},
		{"10MiB changed", "blob = bytearray(10 << 20)", "blob[0] = (blob[0] + 1) % 256"},
		{"workspace 50MiB unchanged", workspace50MiB, "pass"},
		{"workspace 50MiB, one small file changed", workspace50MiB, smallFileChange},
	}
	for _, durable := range []bool{false, true} {
		for _, st := range states {
			name := "checkpoint off/" + st.name
			if durable {
				name = "checkpoint on/" + st.name
			}
			b.Run(name, func(b *testing.B) {
				var store *grpc.ClientConn
				if durable {
					store = sessionStore(b)
				}
				counter := &countingStore{}
				r := newReplicaWrapped(b, store, "unix:/bench.sock", nil, func(c sessionstorev1.SessionStoreServiceClient) sessionstorev1.SessionStoreServiceClient {
					counter.SessionStoreServiceClient = c
					return counter
				})
				id := mustCreate(b, r.c)
				if st.setup != "" {
					mustRun(b, r.c, id, st.setup)
				}
				mustRun(b, r.c, id, st.code)
				// The setup's checkpoint (10 MiB takes a while) is stored
				// before the timing starts.
				for prev := int64(-1); prev != counter.chunks.Load(); {
					prev = counter.chunks.Load()
					time.Sleep(time.Second)
				}
				chunks0, records0 := counter.chunks.Load(), counter.records.Load()
				b.ResetTimer()
				for b.Loop() {
					mustRun(b, r.c, id, st.code)
				}
				b.StopTimer()
				if durable {
					time.Sleep(200 * time.Millisecond) // the last checkpoint is stored
					b.ReportMetric(float64(counter.chunks.Load()-chunks0+counter.records.Load()-records0)/float64(b.N), "bytes/ckpt")
				}
			})
		}
	}
}

// workspace50MiB fills /workspace with 50 files of 1 MiB, random bytes
// (so nothing compresses or repeats), and a small text file.
const workspace50MiB = "import os\nos.makedirs('data', exist_ok=True)\n" +
	"for i in range(50):\n    open('data/%02d.bin' % i, 'wb').write(os.urandom(1 << 20))\n" +
	"open('notes.txt', 'w').write('0')\ndel i"

// smallFileChange rewrites the small text file with a new number.
const smallFileChange = "n = int(open('notes.txt').read()) + 1\nopen('notes.txt', 'w').write(str(n));"

// BenchmarkRestoreToFirstResult times the first result of a call whose
// session's sandbox is gone (killed by the call before), restored from its
// checkpoint, beside a new session's first result from the warm pool and
// from no pool, in the same run; p50 and p99 are reported.
func BenchmarkRestoreToFirstResult(b *testing.B) {
	const state = "import fractions\ncount = 41\ndef bump(n):\n    return n + 1\nclass Box:\n    pass\nbox = Box()\n"
	report := func(b *testing.B, ds []time.Duration) {
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
	}
	for _, bc := range []struct {
		name, state, code, want string
	}{
		{"restore after a kill/small state", state, "print(bump(count))", "42\n"},
		{"restore after a kill/10MiB", state + "blob = bytes(10 << 20)\n", "print(bump(count))", "42\n"},
		{"restore after a kill/workspace 50MiB", state + workspace50MiB + "\n", "print(bump(count), len(os.listdir('data')))", "42 50\n"},
		// The module of saved tools is rebuilt, from the saved tools the
		// restore carries.
		{"restore after a kill/user_tools", state + "import user_tools\nfrom user_tools import double as dbl\n",
			"print(bump(count), dbl(2), user_tools.double(3))", "42 4 6\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			store := sessionStore(b)
			if _, err := memoryv1.NewToolServiceClient(store).SaveTool(b.Context(), &memoryv1.SaveToolRequest{
				Tenant: "alice", Name: "double", Source: "def double(x):\n    return 2 * x\n"}); err != nil {
				b.Fatalf("SaveTool: %v", err)
			}
			r := newReplica(b, store, "unix:/bench.sock", func(c *sandboxd.Config) { c.PoolSize = 2 })
			id := mustCreate(b, r.c)
			mustRun(b, r.c, id, bc.state)
			var ds []time.Duration
			for b.Loop() {
				b.StopTimer()
				_, _ = execute(b.Context(), r.c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"})
				time.Sleep(100 * time.Millisecond) // the pool refills
				b.StartTimer()
				t0 := time.Now()
				res := mustRun(b, r.c, id, bc.code)
				ds = append(ds, time.Since(t0))
				if res.stdout != bc.want || res.result.GetRestored() == nil {
					b.Fatalf("not restored: %q %v", res.stdout, res.result)
				}
			}
			report(b, ds)
		})
	}
	for _, bc := range []struct {
		name string
		pool int
	}{{"new session/warm pool", 2}, {"new session/no pool", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			r := newReplica(b, sessionStore(b), "unix:/bench.sock", func(c *sandboxd.Config) { c.PoolSize = bc.pool })
			var ds []time.Duration
			for b.Loop() {
				b.StopTimer()
				time.Sleep(100 * time.Millisecond) // the pool refills
				b.StartTimer()
				t0 := time.Now()
				id := mustCreate(b, r.c)
				mustRun(b, r.c, id, "print(1)")
				ds = append(ds, time.Since(t0))
			}
			report(b, ds)
		})
	}
}
