package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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

// questions are the questions of a session's runs that wait for answers.
type questions struct {
	mu      sync.Mutex
	waiting map[string]*waiter
	// order keeps the waiting questions in the order they were asked.
	order []string
}

// waiter is one question waiting, and where its answer goes.
type waiter struct {
	q  Question
	ch chan sandbox.Answer
}

// waiting lists the session's questions that wait for answers, oldest
// first.
func (s *Session) waiting() []Question {
	s.questions.mu.Lock()
	defer s.questions.mu.Unlock()
	out := make([]Question, 0, len(s.questions.order))
	for _, id := range s.questions.order {
		out = append(out, s.questions.waiting[id].q)
	}
	return out
}

// has reports whether the question id waits for its answer.
func (qs *questions) has(id string) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return qs.waiting[id] != nil
}

// take removes the question id from those waiting, and returns its
// waiter; nil when it does not wait.
func (qs *questions) take(id string) *waiter {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	w := qs.waiting[id]
	delete(qs.waiting, id)
	qs.order = slices.DeleteFunc(qs.order, func(o string) bool { return o == id })
	return w
}

// asker is the sandbox.Asker of the run runID: it sends each question
// with send and waits for Manager.Answer, until ctx (the run's calls)
// ends.
func (s *Session) asker(runID uint64, send func(Question) error) sandbox.Asker {
	return func(ctx context.Context, a sandbox.Approval) (sandbox.Answer, error) {
		q := Question{ID: randomid.Hex(16), Approval: a, RunID: runID}
		q.Deadline, _ = ctx.Deadline()
		ch := make(chan sandbox.Answer, 1)
		s.questions.mu.Lock()
		if s.questions.waiting == nil {
			s.questions.waiting = map[string]*waiter{}
		}
		s.questions.waiting[q.ID] = &waiter{q: q, ch: ch}
		s.questions.order = append(s.questions.order, q.ID)
		s.questions.mu.Unlock()
		defer s.questions.take(q.ID)
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
	w := s.questions.take(question)
	if w == nil {
		return fmt.Errorf("%w: no question %q waits for an answer on session %s: it was answered already, or the run that asked it has ended", ErrNotFound, question, id)
	}
	w.ch <- ans // buffered, and only one answer takes w from the map
	return nil
}
