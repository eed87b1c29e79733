// Package pgtest runs real PostgreSQL servers for tests: initdb on a
// temporary directory, postgres on a free loopback port, and the handles
// to kill it (SIGKILL to every process of the server, as a crash does),
// restart it, and make a streaming standby and promote it. It uses the
// server binaries of Debian's postgresql package (or any found on PATH or
// in $CODEEXEC_PG_BIN); a test that needs them fails, naming what is
// missing, when they are not there.
//
// As root the server runs as uid 65534 (nobody), since PostgreSQL refuses
// to run as root; the data directory is given to that user.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codeexec/codeexec/services/testenv"
	"github.com/codeexec/codeexec/services/testport"
)

// nobody is the uid and gid the server runs as when the tests run as root.
const nobody = 65534

// Options configure Start.
type Options struct {
	// Conf lines are appended to postgresql.conf, e.g. "fsync = on".
	Conf []string
	// HBA lines are put first in pg_hba.conf, e.g. a password rule for
	// one user; the default rules trust everything on loopback.
	HBA []string
	// Files are written into the data directory (mode 0600, owned by the
	// server's user) before the server starts: a TLS key and
	// certificate, say, that Conf names.
	Files map[string][]byte
}

// Server is one running (or stopped) PostgreSQL server of a test's own.
type Server struct {
	// Dir holds the data directory (Dir/data) and the server's log.
	Dir string
	// Port is the loopback TCP port it listens on.
	Port int

	bin  string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	// release gives Port up, for other tests to take, once the server is
	// removed.
	release func()
}

// Start makes a new cluster and starts it. The server is stopped, and its
// directory removed, when the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	testenv.Postgres(tb)
	s, err := start(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.remove)
	return s
}

func start(opts Options) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := privateDir()
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, bin: bin}
	if err := s.initdb(opts); err != nil {
		s.remove()
		return nil, err
	}
	if err := s.Restart(); err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// binDir finds initdb, postgres and pg_basebackup.
func binDir() (string, error) {
	var tried []string
	candidates := []string{os.Getenv("CODEEXEC_PG_BIN")}
	if p, err := exec.LookPath("initdb"); err == nil {
		// A symlink on PATH (as some installs make in /usr/local/bin)
		// stands for the directory that holds the other binaries.
		if target, err := filepath.EvalSymlinks(p); err == nil {
			p = target
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(matches))) // newest first (single-digit majors sort fine from 10 on)
	candidates = append(candidates, matches...)
	for _, d := range candidates {
		if d == "" {
			continue
		}
		tried = append(tried, d)
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("pgtest: PostgreSQL server binaries (initdb, postgres) not found in $CODEEXEC_PG_BIN, PATH or /usr/lib/postgresql/*/bin (tried %v): install Debian's postgresql package (apt-get install postgresql)", tried)
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// privateDir makes a directory that the server's user can enter: as root
// that is nobody, who cannot enter the tests' 0700 temporary directories.
func privateDir() (string, error) {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// DataDir is the cluster's data directory.
func (s *Server) DataDir() string { return filepath.Join(s.Dir, "data") }

// LogFile is where the server writes its log.
func (s *Server) LogFile() string { return filepath.Join(s.Dir, "postgres.log") }

func (s *Server) initdb(opts Options) error {
	if err := s.mkdirOwned(s.DataDir()); err != nil {
		return err
	}
	out, err := s.command("initdb", "-D", s.DataDir(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	conf := append([]string{
		"listen_addresses = '127.0.0.1'",
		"unix_socket_directories = ''",
		"shared_buffers = 32MB",
		"max_connections = 200",
		"fsync = on",
		"synchronous_commit = on",
		"wal_level = replica",
		"max_wal_senders = 5",
		"logging_collector = off",
		"log_min_messages = warning",
	}, opts.Conf...)
	if err := appendFile(filepath.Join(s.DataDir(), "postgresql.conf"), strings.Join(conf, "\n")+"\n"); err != nil {
		return err
	}
	for name, b := range opts.Files {
		p := filepath.Join(s.DataDir(), name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return err
		}
		if os.Getuid() == 0 {
			if err := os.Chown(p, nobody, nobody); err != nil {
				return err
			}
		}
	}
	if len(opts.HBA) > 0 {
		p := filepath.Join(s.DataDir(), "pg_hba.conf")
		old, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(strings.Join(opts.HBA, "\n")+"\n"+string(old)), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	return errors.Join(err, f.Close())
}

// mkdirOwned makes dir with mode 0700, owned by the server's user.
func (s *Server) mkdirOwned(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if os.Getuid() == 0 {
		return os.Chown(dir, nobody, nobody)
	}
	return nil
}

// command runs one of the server binaries as the server's user.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "HOME=" + s.Dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Getuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	return cmd
}

// Restart starts the server after Kill or Stop (Start starts it the first
// time): on a new free port when its old one was taken meanwhile, else on
// the old one, and waits until it accepts connections. After a kill the
// server first replays its WAL, as after a crash.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("pgtest: the server is running")
	}
	var lastErr error
	for range 5 {
		if s.Port == 0 || lastErr != nil {
			s.releasePort()
			p, release, err := testport.Reserve()
			if err != nil {
				return err
			}
			s.Port, s.release = p, release
		}
		lastErr = s.startOnce()
		if lastErr == nil {
			return nil
		}
	}
	return lastErr
}

func (s *Server) startOnce() error {
	logf, err := os.OpenFile(s.LogFile(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := s.command("postgres", "-D", s.DataDir(), "-p", strconv.Itoa(s.Port))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			err = conn.Ping(ctx)
			_ = conn.Close(ctx)
		}
		cancel()
		if err == nil {
			s.cmd, s.done = cmd, done
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("pgtest: postgres exited at start:\n%s", s.tail())
		default:
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			return fmt.Errorf("pgtest: postgres did not accept connections within 60s: %w\n%s", err, s.tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tail is the end of the server's log, for error messages.
func (s *Server) tail() string {
	b, _ := os.ReadFile(s.LogFile())
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// releasePort gives the port up; the caller holds mu.
func (s *Server) releasePort() {
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// URL is a connection URL for database db as the superuser postgres.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// HostPort is the server's address, for multi-host connection strings.
func (s *Server) HostPort() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// Kill sends SIGKILL to the postmaster and every backend at once, as a
// crash or a power cut would stop them, and waits for the postmaster.
func (s *Server) Kill() {
	s.signal(syscall.SIGKILL)
}

// Stop shuts the server down cleanly (a fast shutdown).
func (s *Server) Stop() {
	s.signal(syscall.SIGINT)
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	if sig == syscall.SIGKILL {
		_ = syscall.Kill(-s.cmd.Process.Pid, sig) // the whole process group
	} else {
		_ = s.cmd.Process.Signal(sig)
	}
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	if sig == syscall.SIGKILL {
		// Backends notice their postmaster's death on their own; wait
		// for the group to be gone so that a restart finds no survivor
		// attached to the old shared memory.
		for range 500 {
			if syscall.Kill(-s.cmd.Process.Pid, 0) != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	s.cmd = nil
}

func (s *Server) remove() {
	s.Stop()
	_ = os.RemoveAll(s.Dir)
	s.mu.Lock()
	s.releasePort()
	s.mu.Unlock()
}

// Exec runs SQL statements on database db as the superuser.
func (s *Server) Exec(ctx context.Context, db string, sql ...string) error {
	conn, err := pgx.Connect(ctx, s.URL(db))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, q := range sql {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// CreateDatabase makes a new, empty database and returns its URL.
func (s *Server) CreateDatabase(tb testing.TB) string {
	tb.Helper()
	s.mu.Lock()
	dbSeq++
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq)
	s.mu.Unlock()
	if err := s.Exec(tb.Context(), "postgres", "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return s.URL(name)
}

var dbSeq int
