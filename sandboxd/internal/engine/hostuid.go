package engine

import (
	"fmt"
	"os/user"
	"strconv"
	"strings"
)

// DefaultHostUID is the host uid that sandboxes run as, and that owns their
// user namespaces, when sandboxd is root and is given none. The kernel
// charges to that uid, against its host-wide limits, much of what the
// sandboxes make (queued signals, locked memory, processes: the counts
// /proc/sys/user and per-user rlimits keep), so it must be a uid nothing
// else runs as; not nobody (65534), which other daemons use. 65533 is in
// the range Debian reserves and allocates to no package.
const DefaultHostUID = 65533

// CheckHostUID refuses a sandbox uid that the host gives to an account:
// the sandboxes would share that account's per-user limits (and it theirs).
// An account named codeexec* is taken for one made for the sandboxes.
func CheckHostUID(uid int) error {
	if uid <= 0 {
		return fmt.Errorf("the sandbox uid %d is root's or not a uid: set CODEEXEC_SANDBOX_UID (--sandbox-uid) to an unused uid, e.g. %d", uid, DefaultHostUID)
	}
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil || strings.HasPrefix(u.Username, "codeexec") {
		return nil //nolint:nilerr // no such account: the uid is free
	}
	return fmt.Errorf("the sandbox uid %d is the host account %q, whose processes would share the per-user kernel limits the sandboxes use (queued signals, processes): "+
		"set CODEEXEC_SANDBOX_UID (--sandbox-uid) to a uid that nothing else uses, e.g. %d, or name a dedicated account codeexec-sandbox", uid, u.Username, DefaultHostUID)
}
