package postgres

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/codeexec/codeexec/services/logkeys"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

// Retries. When the database goes away (a failover, a restart, a network
// cut) every call waits for it, retrying with growing pauses, for at most
// opts.Wait from its first failure; then it fails with ErrUnavailable.
// Reads retry freely. Writes retry with their request ID, so that a write
// that committed just before the connection broke is answered from its
// recorded outcome, not applied again. With target_session_attrs=read-write
// in a multi-host URL, new connections go only to the host that accepts
// writes, so the calls carry on once a standby has been promoted.

const (
	retryFirstPause = 10 * time.Millisecond
	retryMaxPause   = 250 * time.Millisecond
)

// retry runs fn until it succeeds, fails for good, ctx ends, or the wait
// runs out. attempt counts from 1.
func (s *Store) retry(ctx context.Context, fn func(ctx context.Context, attempt int) error) error {
	var (
		firstFail time.Time
		pause     = retryFirstPause
	)
	for attempt := 1; ; attempt++ {
		err := fn(ctx, attempt)
		if err == nil {
			return nil
		}
		if s.closed.Load() {
			return store.ErrClosed
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if cause := permanentCause(err); cause != nil {
			return cause
		}
		if !transient(err) {
			return err
		}
		if connectionLost(err) {
			// The pool's other connections most likely went the same
			// way: drop them all rather than fail on each in turn.
			s.pool.Reset()
		}
		now := time.Now()
		if firstFail.IsZero() {
			firstFail = now
			s.warn(err)
		}
		if now.Sub(firstFail) >= s.opts.Wait {
			s.logger.Error("memory database unreachable; giving up on a call", slog.Duration("store.waited", now.Sub(firstFail)), slog.Any(logkeys.Error, err))
			return fmt.Errorf("%w: the memory database did not answer for %s; try again later", store.ErrUnavailable, s.opts.Wait.Round(time.Second))
		}
		t := time.NewTimer(pause/2 + rand.N(pause/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(pause*2, retryMaxPause)
	}
}

// warn logs a call's first failure, at most once a second for all calls.
func (s *Store) warn(err error) {
	now := time.Now().UnixNano()
	last := s.lastWarn.Load()
	if now-last < int64(time.Second) || !s.lastWarn.CompareAndSwap(last, now) {
		return
	}
	s.logger.Warn("memory database unreachable or failing over; calls wait for it", slog.Duration("store.wait", s.opts.Wait), slog.Any(logkeys.Error, err))
}

// transient reports whether err may go away by itself: the connection
// broke or could not be made, the server is starting, stopping or read
// only (a standby not yet promoted), or a concurrent attempt of the same
// request holds its ID. Domain errors and errors in the statement itself
// are not.
func transient(err error) bool {
	if store.IsDomain(err) || errors.Is(err, store.ErrClosed) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection exception
			return true
		case pgErr.Code == "23505":
			// The same request ID is being written by another attempt
			// (whose answer was lost); the retry finds its outcome.
			return pgErr.ConstraintName == "codeexec_requests_pkey"
		}
		switch pgErr.Code {
		case "40001", // serialization_failure
			"40P01", // deadlock_detected
			"25006", // read_only_sql_transaction: a standby, or a primary being demoted
			"57P01", // admin_shutdown
			"57P02", // crash_shutdown
			"57P03", // cannot_connect_now: starting up, or in recovery
			"53300", // too_many_connections
			"58030": // io_error
			return true
		}
		return false
	}
	if badCertificate(err) {
		return false
	}
	return connectionError(err)
}

// badCertificate reports whether the server's certificate was refused:
// waiting does not fix that.
func badCertificate(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		strings.Contains(err.Error(), "server refused TLS connection")
}

// connectionError reports whether err comes from the connection rather
// than from the statement: refused, reset, cut short, timed out, not
// resolved, or already closed.
func connectionError(err error) bool {
	var (
		ce *pgconn.ConnectError
		ne net.Error
	)
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		pgconn.Timeout(err) || pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed")
}

// connectionLost reports whether err says the server is gone, rather
// than that it refused one statement.
func connectionLost(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "25006"
	}
	return connectionError(err)
}
