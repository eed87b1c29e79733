package memoryd_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/pgtest"
)

// childDir switches the test binary into a bare memoryd serving
// <dir>/memory.db on <dir>/<childSock>. TestKillNine and
// TestKillNineOwnerOfASharedFile re-execute the binary with it, so that
// they can SIGKILL real processes.
var (
	childDir  = flag.String("memoryd.child", "", "internal: run as a memoryd child of the kill tests in this directory")
	childSock = flag.String("memoryd.sock", "s.sock", "internal: the child's socket, in its directory")
)

func TestMain(m *testing.M) {
	flag.Parse()
	if *childDir != "" {
		if err := runChild(*childDir); err != nil {
			fmt.Fprintln(os.Stderr, "memoryd child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(pgtest.Main(m))
}

func runChild(dir string) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	svc, err := memoryd.New(memoryd.Config{Path: filepath.Join(dir, "memory.db")}, logger)
	if err != nil {
		return err
	}
	sock := filepath.Join(dir, *childSock)
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	g := grpc.NewServer()
	svc.Register(g)
	return g.Serve(lis) // until SIGKILL
}

// child is one memoryd process.
type child struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	conn   *grpc.ClientConn
	mem    memoryv1.MemoryServiceClient
}

func startChild(t *testing.T, dir string) *child { return startChildOn(t, dir, "s.sock") }

// startChildOn starts a memoryd child on dir's database that serves on
// the socket sock.
func startChildOn(t testing.TB, dir, sock string) *child {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(os.Args[0], "-memoryd.child="+dir, "-memoryd.sock="+sock)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start memoryd child: %v", err)
	}
	// A short reconnect backoff: the child listens moments after it
	// starts, and gRPC's default first backoff is a whole second.
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, sock), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.6, MaxDelay: 50 * time.Millisecond}, MinConnectTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stderr: &stderr, conn: conn, mem: memoryv1.NewMemoryServiceClient(conn)}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		_, err := c.mem.GetMemory(ctx, &memoryv1.GetMemoryRequest{Key: "ready?"})
		cancel()
		if status.Code(err) == codes.NotFound || err == nil {
			return c
		}
		if time.Now().After(deadline) {
			c.kill()
			t.Fatalf("memoryd child did not come up: %v\nchild stderr:\n%s", err, stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// kill sends SIGKILL: no deferred code, no Close, no final fsync.
func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
	_ = c.conn.Close()
}

// ledger records what the child acknowledged. For keys written once the
// value must be exact; for keys overwritten in a loop the stored value
// must be the last acknowledged one or the one write in flight after it.
type ledger struct {
	mu        sync.Mutex
	once      map[string]string // key → acknowledged value
	last      map[string]int    // overwritten key → last acknowledged value
	attempted map[string]int    // overwritten key → highest value sent
}

// TestKillNine kills memoryd with SIGKILL at random moments while writers
// run, restarts it on the same file, and checks that every acknowledged
// write is there with its acknowledged value and that the file is sound.
func TestKillNine(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "md-kill-") //nolint:usetesting // short: t.TempDir is too long for a unix socket path (about 108 bytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	led := &ledger{once: map[string]string{}, last: map[string]int{}, attempted: map[string]int{}}
	const rounds, writers = 6, 6
	for round := range rounds {
		c := startChild(t, dir)
		if round == 0 {
			// A memoryd in this process shares the child's file.
			svc, err := memoryd.New(memoryd.Config{Path: filepath.Join(dir, "memory.db")}, nil)
			if err != nil {
				t.Fatalf("second memoryd on the child's file: %v", err)
			}
			if svc.Owner() {
				t.Error("this process owns the file the child holds")
			}
			_ = svc.Close()
		}
		verify(t, c.mem, led, round)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				write(c.mem, led, round, w)
			}()
		}
		time.Sleep(time.Duration(50+rand.IntN(400)) * time.Millisecond)
		c.kill()
		wg.Wait()
	}
	c := startChild(t, dir)
	verify(t, c.mem, led, rounds)
	c.kill()
	checkBoltFile(t, filepath.Join(dir, "memory.db"))
	led.mu.Lock()
	total := len(led.once)
	led.mu.Unlock()
	if total < rounds*writers {
		t.Errorf("only %d acknowledged writes over %d rounds; the test did not exercise memoryd", total, rounds)
	}
	t.Logf("%d rounds, %d acknowledged unique writes, all present", rounds, total)
}

// write saves until the child dies. Even writers save fresh keys; odd
// writers overwrite one key with a growing counter.
func write(mem memoryv1.MemoryServiceClient, led *ledger, round, w int) {
	ctx := context.Background()
	for i := 0; ; i++ {
		if w%2 == 0 {
			key := fmt.Sprintf("r%d-w%d-%d", round, w, i)
			val := fmt.Sprintf(`{"round":%d,"i":%d}`, round, i)
			if _, err := mem.SaveMemory(ctx, &memoryv1.SaveMemoryRequest{Key: key, ValueJson: val}); err != nil {
				return
			}
			led.mu.Lock()
			led.once[key] = val
			led.mu.Unlock()
			continue
		}
		key := fmt.Sprintf("counter-w%d", w)
		led.mu.Lock()
		n := led.last[key] + 1
		led.attempted[key] = n
		led.mu.Unlock()
		if _, err := mem.SaveMemory(ctx, &memoryv1.SaveMemoryRequest{Key: key, ValueJson: strconv.Itoa(n)}); err != nil {
			return
		}
		led.mu.Lock()
		led.last[key] = n
		led.mu.Unlock()
	}
}

func verify(t *testing.T, mem memoryv1.MemoryServiceClient, led *ledger, round int) {
	t.Helper()
	led.mu.Lock()
	defer led.mu.Unlock()
	for key, want := range led.once {
		got, err := mem.GetMemory(t.Context(), &memoryv1.GetMemoryRequest{Key: key})
		if err != nil {
			t.Fatalf("after kill %d: acknowledged %q is gone: %v", round, key, err)
		}
		if got.GetRecord().GetValueJson() != want {
			t.Fatalf("after kill %d: %q = %s, acknowledged %s", round, key, got.GetRecord().GetValueJson(), want)
		}
	}
	for key, acked := range led.last {
		got, err := mem.GetMemory(t.Context(), &memoryv1.GetMemoryRequest{Key: key})
		if err != nil {
			t.Fatalf("after kill %d: acknowledged %q is gone: %v", round, key, err)
		}
		n, err := strconv.Atoi(got.GetRecord().GetValueJson())
		if err != nil || n < acked || n > led.attempted[key] {
			t.Fatalf("after kill %d: %q = %s; acknowledged %d, attempted up to %d", round, key, got.GetRecord().GetValueJson(), acked, led.attempted[key])
		}
		// The in-flight write may have landed; it is the new baseline.
		led.last[key] = n
	}
}
