package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

// storeMode checks the PostgreSQL variant (docker-compose.postgres.yml):
// two memoryd replicas on one database. update_memory from sandboxes and
// compare-and-swap increments straight through each replica hit one
// counter, which must come out exact; memory and a saved tool stay
// reachable after one replica is killed, and after the database is
// killed and restarted (the calls made meanwhile wait, then succeed).
func storeMode(ctx context.Context) error {
	mds, err := findService(ctx, "memoryd", "9004")
	if err != nil {
		return err
	}
	if len(mds) < 2 {
		return fmt.Errorf("%d memoryd replicas are running, want 2", len(mds))
	}
	fmt.Printf("memoryd replicas: %d\n", len(mds))
	want, err := incrementEverywhere(ctx, mds)
	if err != nil {
		return err
	}
	s, err := open(ctx)
	if err != nil {
		return err
	}
	defer s.c.Close()
	out, err := s.must(ctx, "print(load_memory('pg-counter'))")
	if err != nil {
		return err
	}
	if out != strconv.Itoa(want) {
		return fmt.Errorf("counter = %s after %d increments through sandboxes and both replicas", out, want)
	}
	fmt.Printf("counter exact: %d increments through %d sessions and %d memoryd replicas\n", want, counterSessions, len(mds))
	if _, err := s.must(ctx, "save_memory('e2e', {'from': 0})\ndef e2e_tool(v):\n    return v * 2\nsave_tool(e2e_tool)"); err != nil {
		return err
	}
	fmt.Printf("killing memoryd replica %s\n", mds[0].name)
	if out, err := exec.CommandContext(ctx, *engine, "kill", mds[0].name).CombinedOutput(); err != nil {
		return fmt.Errorf("kill %s: %w: %s", mds[0].name, err, out)
	}
	if err := recallWithin(ctx, 30*time.Second); err != nil {
		return fmt.Errorf("after killing a memoryd replica: %w", err)
	}
	if err := saveWhileTheDatabaseRestarts(ctx, s, want); err != nil {
		return err
	}
	fmt.Println("e2e: store: PASS")
	return nil
}

// How storeMode's counter is incremented: so many sessions each so many
// times through update_memory, and so many times straight through each
// memoryd replica.
const counterSessions, perSession, perReplica = 4, 10, 20

// incrementEverywhere increments one counter from sandboxes and straight
// through every memoryd replica at once, and returns the count it must
// come to.
func incrementEverywhere(ctx context.Context, mds []replica) (want int, err error) {
	var wg sync.WaitGroup
	errs := make(chan error, counterSessions+len(mds))
	for i := range counterSessions {
		wg.Go(func() {
			s, err := open(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer s.c.Close()
			code := fmt.Sprintf("for _ in range(%d):\n    update_memory('pg-counter', lambda v: (v or 0) + 1)\nprint('ok')", perSession)
			if out, err := s.must(ctx, code); err != nil || out != "ok" {
				errs <- wrong(fmt.Sprintf("session %d: update_memory", i), out, err)
			}
		})
	}
	for _, r := range mds {
		wg.Go(func() {
			conn, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			mem := memoryv1.NewMemoryServiceClient(conn)
			for range perReplica {
				if err := increment(ctx, mem, "pg-counter"); err != nil {
					errs <- fmt.Errorf("increment through %s: %w", r.name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return 0, err
	}
	return counterSessions*perSession + len(mds)*perReplica, nil
}

// saveWhileTheDatabaseRestarts kills the database and starts it again
// while s saves: the save waits, then succeeds in the same sandbox, and
// memory is reachable afterwards.
func saveWhileTheDatabaseRestarts(ctx context.Context, s *session, want int) error {
	pgs, err := findService(ctx, "postgres", "5432")
	if err != nil {
		return err
	}
	// Down for longer than a sandboxd replica's fence (4 s without a
	// heartbeat): the replicas pause their sandboxes, the one running the
	// save included, and resume them when the database is back.
	const down = 8 * time.Second
	fmt.Printf("killing the database (%s), starting it again %s later\n", pgs[0].name, down)
	restarted := make(chan error, 1)
	go func() {
		// stop -t 0: SIGKILL at once, and no restart by the policy.
		if out, err := exec.CommandContext(ctx, *engine, "stop", "-t", "0", pgs[0].name).CombinedOutput(); err != nil {
			restarted <- fmt.Errorf("stop %s: %w: %s", pgs[0].name, err, out)
			return
		}
		time.Sleep(down)
		out, err := exec.CommandContext(ctx, *engine, "start", pgs[0].name).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("start %s: %w: %s", pgs[0].name, err, out)
		}
		restarted <- err
	}()
	// The save starts while the database goes down.
	time.Sleep(200 * time.Millisecond)
	began := time.Now()
	out, err := s.must(ctx, "save_memory('during-restart', 1)\nprint(load_memory('pg-counter'))")
	if err != nil {
		return fmt.Errorf("a save while the database was down: %w", err)
	}
	if err := <-restarted; err != nil {
		return err
	}
	fmt.Printf("a save while the database was down waited %s and succeeded, in the same sandbox\n", time.Since(began).Round(time.Millisecond))
	if out != strconv.Itoa(want) {
		return fmt.Errorf("counter = %s after the database's restart, want %d", out, want)
	}
	if err := recallWithin(ctx, 30*time.Second); err != nil {
		return fmt.Errorf("after the database's restart: %w", err)
	}
	return nil
}

// recallWithin runs recall until it passes or d is over: a session may
// first need a memoryd connection to move to the surviving replica.
func recallWithin(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := inSession(ctx, recall)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		fmt.Printf("  not yet: %v\n", firstLine(err.Error()))
		time.Sleep(time.Second)
	}
}

// increment is update_memory's loop over the RPCs, against one replica.
func increment(ctx context.Context, mem memoryv1.MemoryServiceClient, key string) error {
	for {
		var n int
		rev := uint64(0)
		resp, err := mem.GetMemory(ctx, &memoryv1.GetMemoryRequest{Key: key})
		switch {
		case err == nil:
			n, _ = strconv.Atoi(strings.TrimSpace(resp.GetRecord().GetValueJson()))
			rev = resp.GetRecord().GetRevision()
		case status.Code(err) != codes.NotFound:
			return err
		}
		_, err = mem.UpdateMemory(ctx, &memoryv1.UpdateMemoryRequest{Key: key, ValueJson: strconv.Itoa(n + 1), ExpectedRevision: rev})
		if status.Code(err) != codes.Aborted {
			return err
		}
	}
}
