package bwrap

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
)

// Check implements engine.Engine. It starts one trivial sandbox (/usr/bin/true)
// the first time and remembers success.
func (b *Engine) Check(ctx context.Context) error {
	if b.lookErr != nil {
		return b.lookErr
	}
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	if b.checked {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := b.start(ctx, engine.Spec{ID: "check", Argv: []string{"/usr/bin/true"}})
	if err != nil {
		return fmt.Errorf("%w: bwrap: %w", engine.ErrUnavailable, err)
	}
	if out := engine.Collect(ctx, p, ""); out.Err != nil {
		return checkFailure(out.Stderr, out.Err)
	}
	b.checked = true
	return nil
}

// checkFailure turns a failed trial sandbox into advice.
func checkFailure(stderr string, err error) error {
	msg := strings.TrimSpace(stderr)
	if strings.Contains(msg, "namespace") || strings.Contains(msg, "uid map") || strings.Contains(msg, "uid_map") {
		return fmt.Errorf("%w: bwrap cannot create user namespaces (%s): enable them with "+
			"`sysctl -w kernel.unprivileged_userns_clone=1` (Debian/Ubuntu kernels) and make sure "+
			"`sysctl user.max_user_namespaces` is not 0 (e.g. `sysctl -w user.max_user_namespaces=15000`); "+
			"on Ubuntu 24.04+ also `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`; "+
			"in a container, run it with --security-opt seccomp=unconfined or use the podman/docker runtime",
			engine.ErrUnavailable, msg)
	}
	if msg == "" {
		msg = err.Error()
	}
	return fmt.Errorf("%w: a trial bwrap sandbox failed: %s", engine.ErrUnavailable, msg)
}

// CheckLimits reports limits that no sandbox could get from this process
// (engine.Engine), and says once at start when only bwrap's path can give
// them.
func (b *Engine) CheckLimits(lim engine.Limits) error {
	if err := b.host.check(nsRlimits(lim)); err != nil {
		return err
	}
	limits := b.rlimitsFor(lim)
	if err := b.host.check(limits); err != nil {
		return err
	}
	if err := b.host.forked().check(limits); err != nil && b.cfg.ForkServer {
		b.logger.Warn("sandboxes start with bwrap, not from the fork server, which cannot give them these limits", "error", err)
	}
	return nil
}

// rlimitsFor are the rlimits of a sandbox with lim: where there are
// cgroups, they cap memory and pids instead.
func (b *Engine) rlimitsFor(lim engine.Limits) []rlimit {
	return rlimits(lim, b.cgroups != nil, b.cgroups != nil)
}
