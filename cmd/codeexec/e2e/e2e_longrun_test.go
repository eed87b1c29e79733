package e2e

// End-to-end tests of what a model meets around a long run (issue 39),
// with a short yield: code on a busy session, cancel=true, a wait with
// nothing to wait for, a timeout over the maximum, and a client that
// cancels its call.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

func TestE2ELongRunSurface(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, map[string]string{"CODEEXEC_YIELD": "2s"})
	harness.Code(t, c, "x = 1")

	o := harness.RunPython(t, c, map[string]any{"code": "x = 2\nprint('started', flush=True)\nimport time\ntime.sleep(60)", "timeout": 120})
	if o.IsError || o.Str("status") != "running" || harness.Joined(o.Stdout()) != "started" || len(o.Str("session")) != 32 {
		t.Fatalf("a call past the yield: %s; want running, with its output so far and the handle", o.Text)
	}
	o = harness.RunPython(t, c, map[string]any{"code": "print(x)"})
	if !o.IsError || !strings.Contains(o.Str("error"), "a run is in progress") || !strings.Contains(o.Str("error"), `code=""`) || !strings.Contains(o.Str("error"), "cancel=true") {
		t.Errorf("code while the run is in flight: %s; want an error saying how to wait or cancel", o.Text)
	}
	o = harness.RunPython(t, c, map[string]any{"code": "", "cancel": true})
	if o.Str("status") != "interrupted" || !strings.Contains(o.Text, "cancel") {
		t.Errorf("cancel=true: %s; want the run interrupted, cancelled", o.Text)
	}
	o = harness.RunPython(t, c, map[string]any{"code": ""})
	if o.IsError || o.Str("status") != "idle" || !strings.Contains(o.Text, "Nothing is running") {
		t.Errorf("a wait with nothing in flight: %s", o.Text)
	}
	o = harness.Code(t, c, "print(x)")
	if got := harness.Joined(o.Stdout()); got != "1" || !strings.Contains(o.Text, "rolled back") {
		t.Errorf("after the cancel: %s; want x back at 1, restored", o.Text)
	}
	o = harness.RunPython(t, c, map[string]any{"code": "pass", "timeout": 3601})
	if o.Str("status") != "validation_error" || !strings.Contains(o.Text, "from 1 to 3600") {
		t.Errorf("a timeout over the maximum: %s", o.Text)
	}

	// A client that cancels its call (notifications/cancelled) stops the
	// run: the next wait gets its end.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := harness.CallRunPython(ctx, c, map[string]any{"code": "x = 3\nimport time\ntime.sleep(60)"}); err == nil {
		t.Fatal("the cancelled call returned")
	}
	o = harness.RunPython(t, c, map[string]any{"code": ""})
	if o.Str("status") != "interrupted" || !strings.Contains(o.Text, "cancelled by the client") {
		t.Errorf("the wait after a cancelled call: %s", o.Text)
	}
	if got := harness.Joined(harness.Code(t, c, "print(x)").Stdout()); got != "1" {
		t.Errorf("x after the cancelled call: %q, want 1", got)
	}
}

// A run that yields keeps its tenant's place under --quota-execs until it
// ends: another session's call is refused meanwhile, while waiting for
// the run takes no place; once the run ends the place is free.
func TestE2ELongRunHoldsItsQuotaPlace(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, map[string]string{"CODEEXEC_YIELD": "1s", "CODEEXEC_QUOTA_EXECS": "1"})
	a, b := harness.HTTPClient(t, base), harness.HTTPClient(t, base)
	o := harness.RunPython(t, a, map[string]any{"code": "import time\ntime.sleep(4)\nprint('end')"})
	if o.Str("status") != "running" {
		t.Fatalf("the long call: %s", o.Text)
	}
	if o := harness.RunPython(t, b, map[string]any{"code": "print(1)"}); !o.IsError || !strings.Contains(o.Text, "quota") {
		t.Errorf("another session's call while the run goes on: %s; want it refused by the quota", o.Text)
	}
	for range 10 {
		if o = harness.RunPython(t, a, map[string]any{"code": ""}); o.Str("status") != "running" {
			break
		}
	}
	if harness.Joined(o.Stdout()) != "end" {
		t.Fatalf("waiting for the run: %s", o.Text)
	}
	var got harness.Outcome
	for range 20 { // the place is given back as the run's end reaches its watcher
		if got = harness.RunPython(t, b, map[string]any{"code": "print(1)"}); !got.IsError {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if harness.Joined(got.Stdout()) != "1" {
		t.Errorf("another session's call after the run: %s", got.Text)
	}
}
