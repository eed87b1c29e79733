package usersock_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeexec/codeexec/services/usersock"
)

// The test binary doubles as the other user's process: with this variable
// set it dials (or serves) the socket named by its value and reports.
const childEnv = "USERSOCK_TEST_CHILD"

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		os.Exit(child(v))
	}
	os.Exit(m.Run())
}

// child runs as another user. "dial:PATH" connects with a bare dialer and
// prints what it reads; "serve:PATH" listens and accepts until killed.
func child(v string) int {
	mode, path, _ := strings.Cut(v, ":")
	switch mode {
	case "dial":
		c, err := net.Dial("unix", path) //nolint:gosec // the socket this test made
		if err != nil {
			os.Stdout.WriteString("dial failed: " + err.Error() + "\n")
			return 0
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		os.Stdout.WriteString("read " + string(b) + " then " + errString(err) + "\n")
		return 0
	case "serve":
		lis, err := net.Listen("unix", path)
		if err != nil {
			os.Stdout.WriteString("listen failed: " + err.Error() + "\n")
			return 1
		}
		os.Stdout.WriteString("listening\n")
		for {
			c, err := lis.Accept()
			if err != nil {
				return 1
			}
			_, _ = c.Write([]byte("hello"))
			_ = c.Close()
		}
	}
	return 2
}

func errString(err error) string {
	if err == nil {
		return "EOF"
	}
	return err.Error()
}

func listen(t *testing.T, path string) {
	t.Helper()
	lis, err := usersock.Listen(path, "the test socket", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hello"))
			_ = c.Close()
		}
	}()
}

func TestSameUserConnects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	// A stale file from a killed process is replaced.
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = stale.Close()
	listen(t, path)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("socket mode %v, want 0600", got)
	}
	c, err := usersock.Dial(context.Background(), path, "the test socket")
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	b, _ := io.ReadAll(c)
	if string(b) != "hello" {
		t.Errorf("read %q, want hello", b)
	}
}

func TestNotASocketIsNotRemoved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	if err := os.WriteFile(path, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := usersock.Listen(path, "the test socket", slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a regular file: %v, want a refusal naming it", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "data" {
		t.Errorf("the file was changed: %q", b)
	}
}

// asNobody runs the test binary as uid 65534 in mode:path.
func asNobody(t *testing.T, arg string) *exec.Cmd {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	// The test binary sits in a directory only root may enter: run a copy.
	bin := filepath.Join(openDir(t), "usersock.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+arg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return cmd
}

// openDir is a directory another user may reach, so that only the
// socket's own checks keep that user out.
func openDir(t *testing.T) string {
	// t.TempDir's parent is owner-only: make one beside it.
	dir, err := os.MkdirTemp("", "usersock") //nolint:usetesting // see above
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAnotherUserIsRefused(t *testing.T) {
	path := filepath.Join(openDir(t), "s.sock")
	listen(t, path)
	// Even with the mode opened up (as between bind and chmod), the peer
	// check refuses the other user.
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	out, err := asNobody(t, "dial:"+path).Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	if got := string(out); strings.Contains(got, "hello") || !strings.HasPrefix(got, "read ") {
		t.Errorf("the other user's process got %q, want a connection closed with nothing sent", got)
	}
}

func TestAServerOfAnotherUserIsRefused(t *testing.T) {
	path := filepath.Join(openDir(t), "s.sock")
	cmd := asNobody(t, "serve:"+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "listening\n" {
		t.Fatalf("child: %q", line)
	}
	_, err = usersock.Dial(context.Background(), path, "the test socket")
	if err == nil || !strings.Contains(err.Error(), "uid 65534") || !strings.Contains(err.Error(), "the test socket") {
		t.Fatalf("Dial to another user's server: %v, want a refusal naming its uid and the socket", err)
	}
}
