package forkserver

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// ErrClosed is what Supervisor.Wait returns once the supervisor is closed.
var ErrClosed = errors.New("fork server: closed")

// Supervisor keeps one server running for a Config: it starts it, checks
// it with a trial, and when it exits starts another after a pause that
// grows while starts keep failing. Sandboxes already started run on, and
// callers start new ones without a server meanwhile (Server returns nil).
type Supervisor struct {
	cfg    Config
	trial  func(context.Context, *Server) error
	logger *slog.Logger

	stop   chan struct{}
	looped chan struct{}

	mu       sync.Mutex
	cur      *Server
	starting bool          // a server is being started and tried
	changed  chan struct{} // closed (and replaced) whenever cur or starting changes
	closed   bool
}

// Backoff bounds for restarts; a server that ran this long resets it.
const (
	minBackoff  = 100 * time.Millisecond
	maxBackoff  = 30 * time.Second
	healthyRun  = time.Minute
	startBudget = 30 * time.Second
)

// Supervise starts supervising a server for cfg in the background. trial,
// when not nil, must succeed on a new server before it is used (say, by
// starting a sandbox from it).
func Supervise(cfg Config, trial func(context.Context, *Server) error) *Supervisor {
	s := &Supervisor{cfg: cfg, trial: trial, logger: cfg.Logger, stop: make(chan struct{}),
		looped: make(chan struct{}), changed: make(chan struct{}), starting: true}
	go s.loop()
	return s
}

// Config returns what the supervised servers are made for.
func (s *Supervisor) Config() Config { return s.cfg }

// Server returns the running server, or nil while there is none.
func (s *Supervisor) Server() *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		select {
		case <-s.cur.Done():
			return nil // exited; the loop replaces it
		default:
		}
	}
	return s.cur
}

// Wait returns the running server, waiting for one if there is none.
func (s *Supervisor) Wait(ctx context.Context) (*Server, error) {
	return s.await(ctx, false)
}

// Ready returns the running server; while one is starting, it waits for
// that start to end. It returns nil and no error when no server runs and
// none is starting: the last start failed, or the server exited, and the
// next start waits out its pause. A caller that may take its time (one
// filling a pool) waits here instead of doing without a server that is
// about to be up.
func (s *Supervisor) Ready(ctx context.Context) (*Server, error) {
	return s.await(ctx, true)
}

// await waits for a running server, or when whileStarting only as long
// as one is starting.
func (s *Supervisor) await(ctx context.Context, whileStarting bool) (*Server, error) {
	for {
		s.mu.Lock()
		cur, starting, changed, closed := s.cur, s.starting, s.changed, s.closed
		s.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		if cur != nil {
			select {
			case <-cur.Done():
			default:
				return cur, nil
			}
		} else if whileStarting && !starting {
			return nil, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// set records the running server, or none, and whether one is starting.
func (s *Supervisor) set(srv *Server, starting bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur, s.starting = srv, starting
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Supervisor) loop() {
	defer close(s.looped)
	backoff := minBackoff
	for {
		s.set(nil, true)
		begun := time.Now()
		srv, err := s.startOne()
		if err == nil {
			s.logger.Info("fork server ready", "pid", srv.PID(), "took", time.Since(begun).Round(time.Millisecond), "preloaded", len(srv.cfg.Preload))
		}
		if err != nil {
			s.set(nil, false)
			select {
			case <-s.stop:
				return // Close cut the start short: nothing is unavailable
			default:
			}
			s.logger.Warn("fork server unavailable; sandboxes start without it", "error", err, "retry.in", backoff)
		} else {
			s.set(srv, false)
			started := time.Now()
			select {
			case <-s.stop:
				s.set(nil, false)
				_ = srv.Close()
				return
			case <-srv.Done():
			}
			s.set(nil, false)
			_ = srv.Close()
			if time.Since(started) > healthyRun {
				backoff = minBackoff
			}
			s.logger.Warn("fork server exited; sandboxes start without it until it is back", "retry.in", backoff)
		}
		select {
		case <-s.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// startOne starts a server and runs the trial on it.
func (s *Supervisor) startOne() (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startBudget)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	srv, err := Start(ctx, s.cfg)
	if err != nil {
		return nil, err
	}
	if s.trial != nil {
		if err := s.trial(ctx, srv); err != nil {
			_ = srv.Close()
			return nil, err
		}
	}
	return srv, nil
}

// Close stops the supervision and the server. Sandboxes it started run on.
func (s *Supervisor) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	close(s.stop)
	<-s.looped
}
