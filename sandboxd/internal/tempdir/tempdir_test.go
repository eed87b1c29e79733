package tempdir

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// held keeps the holding process's directory, and so its lock, alive.
var held *Dir

// TestMain lets the test binary be the other process of the tests: with
// TEMPDIR_HOLD set it makes a directory there, prints its path and waits
// to be killed.
func TestMain(m *testing.M) {
	if root := os.Getenv("TEMPDIR_HOLD"); root != "" {
		d, err := Make(root, "p-")
		if err != nil {
			fmt.Fprintln(os.Stdout, "error:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stdout, d.Path)
		// Unreachable, d's lock file would be closed by its finalizer.
		held = d
		// Sleep rather than select{}: with no other goroutine, the runtime
		// takes an empty select for a deadlock and exits, dropping the lock.
		for {
			time.Sleep(time.Hour)
		}
	}
	os.Exit(m.Run())
}

// holder starts a process that holds a directory in root and returns the
// process and the directory's path.
func holder(t *testing.T, root string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "TEMPDIR_HOLD="+root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !filepath.IsAbs(line[:len(line)-1]) {
		t.Fatalf("holder said %q (%v)", line, err)
	}
	return cmd, line[:len(line)-1]
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestStaleDirectoriesGoLiveOnesStay: a directory whose process is alive
// stays, one whose process was killed is removed with its lock file by the
// next Make, and a directory with no lock file is never touched.
func TestStaleDirectoriesGoLiveOnesStay(t *testing.T) {
	root := t.TempDir()
	live, livePath := holder(t, root)
	killed, killedPath := holder(t, root)
	if err := os.WriteFile(filepath.Join(killedPath, "agent.py"), []byte("pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unlocked := filepath.Join(root, "p-unlocked")
	if err := os.Mkdir(unlocked, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()

	d, err := Make(root, "p-")
	if err != nil {
		t.Fatal(err)
	}
	if exists(killedPath) || exists(killedPath+".lock") {
		t.Errorf("the killed process's %s (or its lock file) is still there", killedPath)
	}
	if !exists(livePath) || !exists(livePath+".lock") {
		t.Errorf("the live process's %s was removed", livePath)
	}
	if !exists(unlocked) {
		t.Errorf("%s, which has no lock file, was removed", unlocked)
	}
	// This process's own directory is held as well: a sweep leaves it.
	RemoveStale(root, "p-")
	if !exists(d.Path) {
		t.Errorf("this process's %s was removed by its own sweep", d.Path)
	}
	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	if exists(d.Path) || exists(d.Path+".lock") {
		t.Errorf("Remove left %s or its lock file", d.Path)
	}
	if err := live.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = live.Wait()
	RemoveStale(root, "p-")
	if exists(livePath) {
		t.Errorf("%s is still there after its process was killed and a sweep ran", livePath)
	}
}

// A sweep by another process holds each lock file for a moment, the new
// one's too: Make took that for failure ("lock …: resource temporarily
// unavailable"), seen when two engines started at once in a slow machine.
func TestMakeRacesSweeps(t *testing.T) {
	root := t.TempDir()
	stop := make(chan struct{})
	var sweeps sync.WaitGroup
	for range 2 {
		sweeps.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					RemoveStale(root, "p-")
				}
			}
		})
	}
	var makers sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		makers.Go(func() {
			for range 300 {
				d, err := Make(root, "p-")
				if err != nil {
					errs <- err
					return
				}
				if err := d.Remove(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	makers.Wait()
	close(stop)
	sweeps.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
