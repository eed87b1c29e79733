package memoryd_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

func TestDatabaseFileIs0600(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state", "nested")
	path := filepath.Join(dir, "memory.db")
	e := start(t, memoryd.Config{Path: path})
	e.save(t, "", "k", `1`, "")
	checkMode(t, path, 0o600)
	checkMode(t, dir, 0o700)

	// A file that exists with looser permissions is tightened on open.
	loose := filepath.Join(t.TempDir(), "loose.db")
	e2 := start(t, memoryd.Config{Path: loose})
	e2.closed = true
	if err := e2.svc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, memoryd.Config{Path: loose})
	checkMode(t, loose, 0o600)
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s has mode %o, want %o", path, got, want)
	}
}

// A second memoryd on the same file, as a second MCP client's codeexec
// starts one, shares it at once: each sees the other's writes, and when
// the first closes, the second carries on with the file.
func TestSecondOpenShares(t *testing.T) {
	t.Parallel()
	e := start(t, memoryd.Config{})
	begin := time.Now()
	second := start(t, memoryd.Config{Path: e.path})
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("second open took %v", d)
	}
	if !e.svc.Owner() || second.svc.Owner() {
		t.Fatalf("owners: first %v, second %v; want the first only", e.svc.Owner(), second.svc.Owner())
	}
	second.save(t, "", "from-second", `2`, "")
	e.save(t, "", "from-first", `1`, "")
	if v := e.get(t, "", "from-second").GetValueJson(); v != "2" {
		t.Errorf("first reads %s", v)
	}
	if v := second.get(t, "", "from-first").GetValueJson(); v != "1" {
		t.Errorf("second reads %s", v)
	}
	e.closed = true
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	second.save(t, "", "after", `true`, "")
	if !second.svc.Owner() {
		t.Error("the second memoryd did not take the file over")
	}
	if v := second.get(t, "", "from-first").GetValueJson(); v != "1" {
		t.Errorf("after the takeover: %s", v)
	}
}

// TestBackupWhileWriting takes backups, through the RPC and through
// Service.Backup, while writers run. Each writer saves keys w<n>-0, -1, …
// one after the other, so a consistent snapshot holds a prefix of each
// writer's keys, and bbolt's own consistency check passes on the copy.
func TestBackupWhileWriting(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, cfg memoryd.Config) {
		cfg.SpoolDir = t.TempDir()
		e := start(t, cfg)
		const writers = 4
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var saved atomic.Int64 // records saved so far, by all writers
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					_, err := e.mem.SaveMemory(t.Context(), &memoryv1.SaveMemoryRequest{Key: fmt.Sprintf("w%d-%06d", w, i), ValueJson: strconv.Itoa(i)})
					if err != nil {
						t.Error(err)
						return
					}
					saved.Add(1)
				}
			}()
		}
		// Each backup starts once the writers have saved more records, so
		// that it copies a store being written to and holds records.
		// (A loaded machine may take longer than any fixed sleep to make
		// the first saves.)
		waitSaved := func(n int64) {
			t.Helper()
			for deadline := time.Now().Add(30 * time.Second); saved.Load() < n; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the writers saved %d records in 30 s, want %d", saved.Load(), n)
				}
			}
		}
		stopWriters := sync.OnceFunc(func() {
			close(stop)
			wg.Wait()
		})
		defer stopWriters()
		waitSaved(writers)
		dir := t.TempDir()
		rpcCopy := filepath.Join(dir, "rpc.db")
		n, err := memoryd.BackupToFile(t.Context(), e.mem, rpcCopy)
		if err != nil {
			t.Fatalf("BackupToFile: %v", err)
		}
		waitSaved(saved.Load() + writers)
		var buf bytes.Buffer
		if _, err := e.svc.Backup(t.Context(), &buf); err != nil {
			t.Fatalf("Service.Backup: %v", err)
		}
		stopWriters()
		spool := filepath.Dir(e.path)
		if cfg.Store != "" {
			spool = cfg.SpoolDir
		}
		entries, _ := os.ReadDir(spool)
		for _, de := range entries {
			if strings.HasPrefix(de.Name(), ".memoryd-backup-") || strings.HasPrefix(de.Name(), "memoryd-backup-") {
				t.Errorf("spool directory holds %v: a backup spool file was left behind", entries)
			}
		}
		directCopy := filepath.Join(dir, "direct.db")
		if err := os.WriteFile(directCopy, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(rpcCopy)
		if err != nil || fi.Size() != n || fi.Mode().Perm() != 0o600 {
			t.Fatalf("backup file: %v, %v; want %d bytes, mode 600", fi, err, n)
		}
		for _, path := range []string{rpcCopy, directCopy} {
			checkBoltFile(t, path)
			// memoryd itself opens the copy and serves it.
			c := start(t, memoryd.Config{Path: path})
			list, err := c.mem.ListMemories(t.Context(), &memoryv1.ListMemoriesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			next := map[string]int{}
			for _, r := range list.GetRecords() {
				w, i, _ := strings.Cut(r.GetKey(), "-")
				idx, _ := strconv.Atoi(i)
				if idx != next[w] {
					t.Fatalf("%s: writer %s has key %d after %d keys: the copy is not a snapshot", filepath.Base(path), w, idx, next[w])
				}
				next[w]++
			}
			if len(list.GetRecords()) == 0 {
				t.Errorf("%s: backup holds no records", filepath.Base(path))
			}
			t.Logf("%s: %d records", filepath.Base(path), len(list.GetRecords()))
		}
	})
}

// checkBoltFile opens a database read-only and runs bbolt's page check.
func checkBoltFile(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s fails bbolt's check: %v", path, err)
	}
}

// TestConcurrentUpdatesLoseNothing runs update_memory's loop (read, add
// one, compare-and-swap, retry on conflict) from 16 goroutines, 100 times
// each. Every increment must land.
func TestConcurrentUpdatesLoseNothing(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, cfg memoryd.Config) {
		e := start(t, cfg)
		const workers, per = 16, 100
		var conflicts sync.Map
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				retries := 0
				for range per {
					for attempt := 0; ; attempt++ {
						var cur int
						var rev uint64
						got, err := e.mem.GetMemory(t.Context(), &memoryv1.GetMemoryRequest{Key: "n"})
						switch status.Code(err) {
						case codes.OK:
							cur, _ = strconv.Atoi(got.GetRecord().GetValueJson())
							rev = got.GetRecord().GetRevision()
						case codes.NotFound:
						default:
							t.Error(err)
							return
						}
						_, err = e.mem.UpdateMemory(t.Context(), &memoryv1.UpdateMemoryRequest{Key: "n", ValueJson: strconv.Itoa(cur + 1), ExpectedRevision: rev})
						if err == nil {
							break
						}
						if status.Code(err) != codes.Aborted {
							t.Error(err)
							return
						}
						retries++
						// Back off a little, as the sandbox helper does, so
						// that 16 writers do not keep colliding in lock step.
						time.Sleep(time.Duration(rand.IntN(100<<min(attempt, 6))) * time.Microsecond)
					}
				}
				conflicts.Store(w, retries)
			}()
		}
		wg.Wait()
		rec := e.get(t, "", "n")
		if rec.GetValueJson() != strconv.Itoa(workers*per) || rec.GetRevision() != workers*per {
			t.Errorf("counter = %s at revision %d, want %d", rec.GetValueJson(), rec.GetRevision(), workers*per)
		}
		total := 0
		conflicts.Range(func(_, v any) bool { total += v.(int); return true })
		t.Logf("%d conflicts retried", total)
	})
}
