package quota

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// Admit counts the tenant's sessions where sandboxd says (every era's),
// falls back to the gateway's own count where it cannot, and lets one
// tenant's admissions take turns, so that concurrent ones see each
// other's sessions.
func TestSessionsAdmit(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	have := map[string]int{}
	countErr := error(nil)
	count := func(_ context.Context, tenant string) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return have[tenant], countErr
	}
	create := func(tenant string) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			have[tenant]++
			return nil
		}
	}
	s := NewSessions(2, count, time.Minute)
	var wg sync.WaitGroup
	var refused sync.Map
	for i := range 5 {
		wg.Go(func() {
			if err := s.Admit(t.Context(), "alpha", 0, create("alpha")); err != nil {
				refused.Store(i, err)
			}
		})
	}
	wg.Wait()
	n := 0
	refused.Range(func(_, v any) bool {
		n++
		var qe *Error
		if !errors.As(v.(error), &qe) || !strings.Contains(qe.Error(), "limit of 2 concurrent sessions") || !strings.Contains(qe.Error(), "runtime.end_session()") {
			t.Errorf("refusal %v; want the sessions quota, with how to end a session", v)
		}
		return true
	})
	if n != 3 || have["alpha"] != 2 {
		t.Errorf("5 concurrent admissions at a quota of 2: %d refused, %d made; want 3 and 2", n, have["alpha"])
	}
	if err := s.Admit(t.Context(), "beta", 0, create("beta")); err != nil {
		t.Errorf("another tenant: %v", err)
	}
	mu.Lock()
	countErr = errors.New("unimplemented")
	mu.Unlock()
	if err := s.Admit(t.Context(), "alpha", 1, create("alpha")); err != nil {
		t.Errorf("sandboxd cannot count, the gateway holds 1 of 2: %v", err)
	}
	if err := s.Admit(t.Context(), "alpha", 2, create("alpha")); err == nil {
		t.Error("sandboxd cannot count, the gateway holds 2 of 2: admitted")
	}
	if err := (*Sessions)(nil).Admit(t.Context(), "alpha", 9, func() error { return nil }); err != nil {
		t.Errorf("no quota: %v", err)
	}
}
