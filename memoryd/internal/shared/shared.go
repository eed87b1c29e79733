// Package shared lets any number of codeexec processes of one user use one
// bbolt database. Several MCP clients on one machine (two Claude Code
// terminals, Claude Desktop beside Cursor) each start their own `codeexec
// serve` on the same state dir, and bbolt lets only one process open the
// file. So the process that holds the file's lock, the owner, serves its
// store on a unix socket beside the file (StoreService, owner-only, peer
// uid checked), and every other process uses the store through that
// socket. Each of them keeps polling the lock; when the owner exits or is
// killed, the kernel releases it, one of them takes it and the socket over,
// and the calls the others had in flight retry on the new owner. Writes
// carry request IDs, so a write that the dead owner committed without
// answering is not applied twice.
package shared

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	"github.com/codeexec/codeexec/memoryd/internal/store/bolt"
	sharedstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sharedstore/v1"
	"github.com/codeexec/codeexec/services/dial"
	"github.com/codeexec/codeexec/services/grpcserver"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/usersock"
)

// Defaults of Options.
const (
	// DefaultWait bounds how long a call waits for an owner. A takeover
	// takes tens of milliseconds; the rest is room for a loaded machine.
	DefaultWait = 10 * time.Second
	// DefaultPoll is how often a non-owner tries the lock.
	DefaultPoll = 25 * time.Millisecond
)

// nonSharingGrace is how long the lock may be held without a live owner
// file before the holder is taken for a process that does not share (an
// older codeexec): a new owner writes its file a moment after it locks.
const nonSharingGrace = 2 * time.Second

// Options configure Open.
type Options struct {
	// Path is the bbolt file.
	Path string
	// Bolt is passed to bolt.Open; its LockTimeout is ignored.
	Bolt bolt.Options
	// Version is this codeexec's version, written in the owner file and
	// named in errors.
	Version string
	// Wait bounds how long a call waits for an owner; 0 is DefaultWait.
	Wait time.Duration
	// Poll is how often a non-owner tries the lock; 0 is DefaultPoll.
	Poll time.Duration
	// Logger receives ownership changes.
	Logger *slog.Logger
}

// Store is a store.Store on a shared database: the bbolt file itself in
// the owner, the owner's socket elsewhere.
type Store struct {
	opts   Options
	logger *slog.Logger

	// cur is the store calls go to; it changes once at most, from the
	// remote to the file, when this process takes the lock over.
	cur atomic.Pointer[storeBox]
	// owner is set once this process holds the lock.
	owner atomic.Bool
	// takeovers counts the times this process took the lock from
	// another one.
	takeovers atomic.Int64

	conn *grpc.ClientConn // to the owner's socket; nil in a first owner

	mu         sync.Mutex
	bolt       *bolt.Store
	stopServer func()     // ends the socket server gracefully
	served     chan error // the socket server's result

	// block is a reason why no usable owner will come, or nil.
	block atomic.Pointer[error]
	// heldSince is when the lock was first seen held without a live,
	// compatible owner file (zero when it is not).
	heldSince time.Time
	described map[int]string // pid → describeProcess, for the loop

	stop chan struct{}
	done chan struct{}
}

// storeBox lets an interface value live in an atomic.Pointer.
type storeBox struct{ store.Store }

var _ store.Store = (*Store)(nil)

// Open opens the database at opts.Path: as its owner when no other process
// holds it, else through the owner's socket, taking it over later if the
// owner goes away. Only errors other than a held lock fail it.
func Open(opts Options) (*Store, error) {
	if opts.Wait <= 0 {
		opts.Wait = DefaultWait
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Bolt.Now == nil {
		opts.Bolt.Now = time.Now
	}
	s := &Store{opts: opts, logger: opts.Logger, described: map[int]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	b, err := s.tryLock()
	if err != nil && !errors.Is(err, store.ErrLocked) {
		return nil, err
	}
	if b != nil {
		if err := s.own(b); err != nil {
			_ = b.Close()
			return nil, err
		}
		close(s.done)
		s.logger.Info("memory database opened; serving it to other codeexec processes",
			slog.String(logkeys.StorePath, opts.Path), slog.String("socket", SocketPath(opts.Path)))
		return s, nil
	}
	sock := SocketPath(opts.Path)
	s.conn, err = dial.New(sock, func(ctx context.Context, _ string) (net.Conn, error) { return usersock.Dial(ctx, sock, socketWhat) },
		grpc.WithConnectParams(grpc.ConnectParams{
			// A new owner listens within tens of milliseconds of the old
			// one's death; gRPC's default first backoff is a second.
			Backoff:           backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 100 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		return nil, err
	}
	s.cur.Store(&storeBox{&remote{client: sharedstorev1.NewStoreServiceClient(s.conn)}})
	s.diagnose()
	if info, ok := readOwner(opts.Path); ok && alive(info.PID) {
		s.logger.Info("memory database is held by another codeexec; using it through its socket",
			slog.String(logkeys.StorePath, opts.Path), slog.Int("owner.pid", info.PID), slog.String("owner.version", info.Version))
	}
	go s.follow()
	return s, nil
}

// tryLock makes one attempt at the file's lock, without waiting.
func (s *Store) tryLock() (*bolt.Store, error) {
	o := s.opts.Bolt
	// bbolt tries the lock once when the timeout is below its retry step.
	o.LockTimeout = time.Millisecond
	return bolt.Open(s.opts.Path, o)
}

// own makes this process the owner of b: it serves b on the socket and
// says so in the owner file, then sends its own calls to b.
func (s *Store) own(b *bolt.Store) error {
	sock := SocketPath(s.opts.Path)
	lis, err := usersock.Listen(sock, socketWhat, s.logger)
	if err != nil {
		return fmt.Errorf("serve the memory database to other processes: %w", err)
	}
	srv := grpcserver.New(s.logger, nil)
	sharedstorev1.RegisterStoreServiceServer(srv.GRPC, &server{st: b, logger: s.logger})
	served := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { served <- srv.Serve(ctx, lis, 2*time.Second) }()
	info := ownerInfo{PID: os.Getpid(), Version: s.opts.Version, Protocol: Protocol, Socket: sock, Since: time.Now().UTC()}
	if err := writeOwner(s.opts.Path, info); err != nil {
		cancel()
		serveErr := <-served
		_ = os.Remove(sock)
		return errors.Join(err, serveErr)
	}
	s.mu.Lock()
	s.bolt, s.stopServer, s.served = b, cancel, served
	s.mu.Unlock()
	s.cur.Store(&storeBox{b})
	s.block.Store(nil)
	s.owner.Store(true)
	return nil
}

func (s *Store) current() store.Store { return s.cur.Load().Store }

// retry runs op on the current store until an owner answers it, or Wait
// passes without one, or ctx ends. Each attempt looks the store up again,
// so once this process has taken the file over, the retry runs on it
// directly.
func retry[T any](ctx context.Context, s *Store, op func(st store.Store) (T, error)) (T, error) {
	began := time.Now()
	pause := time.Millisecond
	for {
		if err := s.blocked(); err != nil && !s.Owner() {
			var zero T
			return zero, err
		}
		v, err := op(s.current())
		if !errors.Is(err, errRetry) {
			return v, err
		}
		if time.Since(began) >= s.opts.Wait {
			var zero T
			return zero, s.unavailable()
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
		pause = min(2*pause, 25*time.Millisecond)
	}
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, tenant string, kind store.Kind, key string) (store.Record, error) {
	return retry(ctx, s, func(st store.Store) (store.Record, error) { return st.Get(ctx, tenant, kind, key) })
}

// Put implements store.Store. A write that goes to another process gets a
// request ID, so that its retries are safe.
func (s *Store) Put(ctx context.Context, tenant string, kind store.Kind, key string, w store.Write) (store.Record, error) {
	if len(w.RequestID) == 0 && !s.Owner() {
		w.RequestID = store.NewRequestID(s.opts.Bolt.Now())
	}
	return retry(ctx, s, func(st store.Store) (store.Record, error) { return st.Put(ctx, tenant, kind, key, w) })
}

// Delete implements store.Store, with request IDs as Put.
func (s *Store) Delete(ctx context.Context, tenant string, kind store.Kind, key string, requestID []byte) (bool, error) {
	if len(requestID) == 0 && !s.Owner() {
		requestID = store.NewRequestID(s.opts.Bolt.Now())
	}
	return retry(ctx, s, func(st store.Store) (bool, error) { return st.Delete(ctx, tenant, kind, key, requestID) })
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, tenant string, kind store.Kind, withValues bool) ([]store.Record, error) {
	return retry(ctx, s, func(st store.Store) ([]store.Record, error) { return st.List(ctx, tenant, kind, withValues) })
}

// Tenants implements store.Store.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	return retry(ctx, s, func(st store.Store) ([]string, error) { return st.Tenants(ctx) })
}

// Backup implements store.Store.
func (s *Store) Backup(ctx context.Context, w io.Writer) (int64, error) {
	return retry(ctx, s, func(st store.Store) (int64, error) { return st.Backup(ctx, w) })
}

// Created reports whether this process created the database file when it
// opened it (a first start), as against finding one, or taking one over.
func (s *Store) Created() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bolt != nil && s.bolt.Created()
}

// Owner reports whether this process holds the database.
func (s *Store) Owner() bool { return s.owner.Load() }

// Takeovers counts the times this process took the database over.
func (s *Store) Takeovers() int64 { return s.takeovers.Load() }

// Close stops polling; an owner stops serving the socket (letting the
// calls in progress finish, for up to two seconds), removes it and its
// owner file, and closes the database, which releases the lock for the
// next owner. Call it after this process's own calls have stopped.
func (s *Store) Close() error {
	select {
	case <-s.stop:
		return nil
	default:
		close(s.stop)
	}
	<-s.done
	var err error
	s.mu.Lock()
	if s.bolt != nil {
		s.stopServer()
		serveErr := <-s.served
		_ = os.Remove(SocketPath(s.opts.Path))
		removeOwner(s.opts.Path)
		err = errors.Join(s.bolt.Close(), serveErr)
	}
	s.mu.Unlock()
	if s.conn != nil {
		_ = s.conn.Close()
	}
	return err
}
