package shared

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	"github.com/codeexec/codeexec/services/logkeys"
)

// A process that is not the owner polls the lock to take the database
// over, and looks at who holds it to say why no owner answers.

// follow polls the lock until this process gets it or Close is called.
func (s *Store) follow() {
	defer close(s.done)
	t := time.NewTicker(s.opts.Poll)
	defer t.Stop()
	lastDiagnose := time.Time{}
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		b, err := s.tryLock()
		if err == nil {
			if err := s.own(b); err != nil {
				_ = b.Close()
				s.logger.Error("took the memory database's lock but cannot serve it; trying again", slog.Any(logkeys.Error, err))
				continue
			}
			s.takeovers.Add(1)
			s.logger.Info("took the memory database over from the process that held it; serving it to the others",
				slog.String(logkeys.StorePath, s.opts.Path))
			return
		}
		if !errors.Is(err, store.ErrLocked) {
			s.logger.Warn("cannot open the memory database to take it over", slog.Any(logkeys.Error, err))
		}
		if time.Since(lastDiagnose) >= 250*time.Millisecond {
			lastDiagnose = time.Now()
			s.diagnose()
		}
	}
}

// diagnose looks at who holds the lock, for blocked and for errors: a
// live owner of this protocol is fine (calls wait for its socket); one of
// another protocol, or a holder without an owner file for longer than
// nonSharingGrace, will never answer, so calls fail at once saying why.
func (s *Store) diagnose() {
	info, ok := readOwner(s.opts.Path)
	holder := lockHolder(s.opts.Path)
	if ok && alive(info.PID) && (holder == 0 || holder == info.PID) {
		s.heldSince = time.Time{}
		if info.Protocol == Protocol {
			s.block.Store(nil)
			return
		}
		err := unavailablef("memory is unavailable: %s is held by codeexec %s (pid %d, shared-state protocol %s), and this codeexec %s speaks protocol %s, so they cannot share it; "+
			"stop one of them, or run the same codeexec version in every MCP client", s.opts.Path, info.Version, info.PID, info.Protocol, s.opts.Version, Protocol)
		s.block.Store(&err)
		return
	}
	if holder == 0 {
		// Released, or held where /proc/locks cannot show it: the next
		// tries tell.
		s.heldSince = time.Time{}
		s.block.Store(nil)
		return
	}
	if s.heldSince.IsZero() {
		s.heldSince = time.Now()
	}
	if time.Since(s.heldSince) < nonSharingGrace {
		return
	}
	who, seen := s.described[holder]
	if !seen {
		who = describeProcess(holder)
		s.described[holder] = who
	}
	err := unavailablef("memory is unavailable: %s is held by %s, which does not share it with other processes (a codeexec older than this one, %s, or another program); "+
		"stop it or upgrade it, and this process takes the database over", s.opts.Path, who, s.opts.Version)
	s.block.Store(&err)
}

// blocked returns why no usable owner will come, or nil.
func (s *Store) blocked() error {
	if p := s.block.Load(); p != nil {
		return *p
	}
	return nil
}

// unavailable explains a call that found no owner within the wait.
func (s *Store) unavailable() error {
	if err := s.blocked(); err != nil {
		return err
	}
	var why string
	if info, ok := readOwner(s.opts.Path); ok && alive(info.PID) {
		why = fmt.Sprintf("its owner, codeexec %s (pid %d), did not answer", info.Version, info.PID)
	} else if pid := lockHolder(s.opts.Path); pid != 0 {
		why = describeProcess(pid) + " holds it and did not answer"
	} else {
		why = "no process served it"
	}
	return unavailablef("memory is unavailable: for %s, %s on %s; calls succeed again once a codeexec serves %s", s.opts.Wait, why, SocketPath(s.opts.Path), s.opts.Path)
}

// unavailablef is an error that unwraps to store.ErrUnavailable, which
// memoryd's handlers answer with UNAVAILABLE and this message.
func unavailablef(format string, args ...any) error {
	return &remoteError{store.ErrUnavailable, fmt.Sprintf(format, args...)}
}
