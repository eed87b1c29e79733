package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	"github.com/codeexec/codeexec/services/randomid"
)

// Question is a tool call of a run that waits for a person's approval,
// as sent to the run's caller (an Event's Question).
type Question struct {
	// ID names the question in Manager.Answer: random, so that it may
	// travel through the client and back.
	ID string
	sandbox.Approval
	// Deadline is when the run's time ends; no answer counts after it.
	Deadline time.Time
	// RunID is the run that asks; zero for one bound to its call.
	RunID uint64
}

// waiting lists the session's questions that wait for answers, oldest
// first.
func (s *Session) waiting() []Question { return s.questions.Waiting() }

// asker is the sandbox.Asker of the run runID: it sends each question
// with send and waits for Manager.Answer, until ctx (the run's calls)
// ends.
func (s *Session) asker(runID uint64, send func(Question) error) sandbox.Asker {
	return func(ctx context.Context, a sandbox.Approval) (sandbox.Answer, error) {
		q := Question{ID: randomid.Hex(16), Approval: a, RunID: runID}
		q.Deadline, _ = ctx.Deadline()
		ch, done := s.questions.Ask(q.ID, q)
		defer done()
		if err := send(q); err != nil {
			return sandbox.Answer{Decision: sandbox.Unavailable, Reason: "the question could not be sent to the client: " + err.Error()}, nil
		}
		select {
		case ans := <-ch:
			return ans, nil
		case <-ctx.Done():
			return sandbox.Answer{}, ctx.Err()
		}
	}
}

// Answer delivers a person's answer to a question of the session's run.
// A question not waiting (answered, its run over, never asked) is
// ErrNotFound; a durable session live on another replica is an
// *ElsewhereError, as its run, which asked, is there.
func (m *Manager) Answer(ctx context.Context, tenant, id, question string, ans sandbox.Answer) error {
	if ans.Decision < sandbox.Accept || ans.Decision > sandbox.Unavailable {
		return fmt.Errorf("%w: the decision is missing; give accept, decline, cancel or unavailable", ErrInvalid)
	}
	s, err := m.Get(tenant, id)
	if err != nil {
		if d := m.cfg.Durable; d != nil {
			where, herr := d.Store.Holder(ctx, cmp.Or(tenant, "default"), id)
			if herr != nil {
				return errors.Join(err, herr)
			}
			if where != nil {
				return &ElsewhereError{Replica: where.Replica, Address: where.Address}
			}
		}
		return err
	}
	if !s.questions.Answer(question, ans) {
		return fmt.Errorf("%w: no question %q waits for an answer on session %s: it was answered already, or the run that asked it has ended", ErrNotFound, question, id)
	}
	return nil
}
