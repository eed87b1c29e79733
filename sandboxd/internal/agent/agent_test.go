package agent

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

const python = "/usr/bin/python3"

func TestWriteTo(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "agent")
	if err := WriteTo(dir); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	// A second write over existing files must succeed too.
	if err := WriteTo(dir); err != nil {
		t.Fatalf("WriteTo again: %v", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o755 {
		t.Errorf("dir mode = %o, want 755", got)
	}
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		t.Fatal(err)
	}
	var sawEntry bool
	for _, e := range entries {
		want, _ := files.ReadFile(e.Name())
		path := filepath.Join(dir, e.Name())
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("read %s: %v", path, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the embedded file", e.Name())
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if perm := st.Mode().Perm(); perm != 0o644 {
			t.Errorf("%s mode = %o, want 644", e.Name(), perm)
		}
		sawEntry = sawEntry || e.Name() == Entry
	}
	if !sawEntry {
		t.Errorf("embedded files lack the entry %s", Entry)
	}
}

type frame map[string]any

func writeFrame(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var head [4]byte
	binary.BigEndian.PutUint32(head[:], uint32(len(body)))
	_, err = w.Write(append(head[:], body...))
	return err
}

func readFrame(r io.Reader) (frame, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(head[:]))
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	var f frame
	return f, json.Unmarshal(body, &f)
}

// writtenAgent writes the agent into a temporary directory for a test that
// runs it with python.
func writtenAgent(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("this test needs %s (Debian package python3): %v", python, err)
	}
	dir := t.TempDir()
	if err := WriteTo(dir); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	return dir
}

func TestPrecompile(t *testing.T) {
	t.Parallel()
	dir := writtenAgent(t)
	if err := Precompile(t.Context(), python, dir); err != nil {
		t.Fatal(err)
	}
	pycs, err := filepath.Glob(filepath.Join(dir, "__pycache__", "*.pyc"))
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := fs.ReadDir(files, ".")
	if len(pycs) != len(entries) {
		t.Errorf("got %d .pyc files %v, want one per embedded file (%d)", len(pycs), pycs, len(entries))
	}
	for _, p := range pycs {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o644 {
			t.Errorf("%s mode = %o, want 644", p, st.Mode().Perm())
		}
	}
	runAgent(t, dir)
}

// TestWrittenAgentRuns starts the written agent with plain python3 (no
// sandbox) and checks the ready frame and one exec.
func TestWrittenAgentRuns(t *testing.T) {
	t.Parallel()
	dir := writtenAgent(t)
	runAgent(t, dir)
}

// runAgent starts the agent in dir and checks ready and one exec.
func runAgent(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), python, "-I", filepath.Join(dir, Entry))
	cmd.Dir = t.TempDir()
	cmd.Env = []string{}
	var diag bytes.Buffer
	cmd.Stderr = &diag
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	frames := make(chan frame)
	go func() {
		defer close(frames)
		for {
			f, err := readFrame(stdout)
			if err != nil {
				return
			}
			frames <- f
		}
	}()
	next := func() frame {
		t.Helper()
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("agent closed the channel; diagnostics: %s", diag.String())
			}
			return f
		case <-time.After(20 * time.Second):
			t.Fatal("timed out waiting for a frame")
		}
		return nil
	}

	if f := next(); f["t"] != "ready" || f["pid"] != float64(cmd.Process.Pid) {
		t.Fatalf("first frame = %v, want ready with pid %d", f, cmd.Process.Pid)
	}
	execMsg := frame{"t": "exec", "id": 1, "code": "print(6 * 7)", "servers": []any{},
		"discovered": []any{}, "limit": 0}
	if err := writeFrame(stdin, execMsg); err != nil {
		t.Fatal(err)
	}
	var out string
	for {
		f := next()
		if f["t"] == "out" && f["s"] == "stdout" {
			out += f["d"].(string)
			continue
		}
		if f["t"] != "done" {
			t.Fatalf("unexpected frame %v", f)
		}
		if f["ok"] != true || f["exit"] != float64(0) || f["id"] != float64(1) {
			t.Errorf("done = %v, want ok exit 0 for exec 1", f)
		}
		break
	}
	if out != "42\n" {
		t.Errorf("stdout = %q, want %q", out, "42\n")
	}
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent exit: %v; diagnostics: %s", err, diag.String())
	}
}
