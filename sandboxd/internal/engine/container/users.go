package container

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/codeexec/codeexec/sandboxd/internal/tempdir"
)

// sharedUser is who sandboxes run as when they cannot have uids of their
// own (a rootless engine): upstream's user, nobody.
const sharedUser = "65534:65534"

// identity is who one sandbox runs as.
type identity struct {
	id string
	// user is the --user value.
	user string
	// uid is the host uid of its own, 0 with a shared user; passwd and
	// group are then the host files mounted at /etc/passwd and /etc/group.
	uid           int
	passwd, group string
}

// args are the `run` options that make the container this identity.
func (w identity) args() []string {
	a := []string{"--user", w.user}
	if w.passwd != "" {
		a = append(a, "--mount", "type=bind,src="+w.passwd+",dst=/etc/passwd,readonly",
			"--mount", "type=bind,src="+w.group+",dst=/etc/group,readonly")
	}
	if w.uid != 0 {
		a = append(a, "--label", LabelUID+"="+strconv.Itoa(w.uid))
	}
	return a
}

// claim gives sandbox id its identity: Config.User, or a host uid of its
// own with a passwd and group that name it. Every claim is followed by
// an unclaim once the container is gone.
func (c *Engine) claim(id string) (identity, error) {
	switch {
	case c.uids == nil:
		return identity{id: id, user: c.cfg.User}, nil
	case c.shared.Load():
		return identity{id: id, user: sharedUser}, nil
	}
	uid, err := c.uids.take(id, procUIDs(c.uids.first, c.uids.count))
	if err != nil {
		return identity{}, err
	}
	w := identity{id: id, user: strconv.Itoa(uid) + ":" + strconv.Itoa(uid), uid: uid}
	dir, err := c.usersDir()
	if err == nil {
		passwd, group := userFiles(uid)
		// Named by uid, which no other live sandbox of this engine has.
		w.passwd, w.group = filepath.Join(dir, strconv.Itoa(uid)+".passwd"), filepath.Join(dir, strconv.Itoa(uid)+".group")
		err = os.WriteFile(w.passwd, []byte(passwd), 0o644)
		if err == nil {
			err = os.WriteFile(w.group, []byte(group), 0o644)
		}
	}
	if err != nil {
		c.unclaim(w, false)
		return identity{}, fmt.Errorf("the sandbox's passwd file: %w", err)
	}
	return w, nil
}

// unclaim gives w's uid back and removes its files. kept says the
// container may still exist (it could not be removed): its uid then stays
// taken until a listing no longer finds the container.
func (c *Engine) unclaim(w identity, kept bool) {
	if w.uid == 0 {
		return
	}
	if w.passwd != "" {
		_ = os.Remove(w.passwd)
		_ = os.Remove(w.group)
	}
	c.uids.give(w.id, kept)
}

// usersDir makes, on first use, the directory of this engine's passwd and
// group files, in Config.FilesDir.
func (c *Engine) usersDir() (string, error) {
	c.usersMu.Lock()
	defer c.usersMu.Unlock()
	if c.users == nil {
		d, err := tempdir.Make(c.cfg.FilesDir, "codeexec-users-")
		if err != nil {
			return "", err
		}
		// The files are bind-mounted by path, which the runtime's daemon
		// resolves as root; the directory need not be open to others.
		c.users = d
	}
	return c.users.Path, nil
}

// removeUsers removes the passwd directory, once every container is gone.
func (c *Engine) removeUsers() {
	c.usersMu.Lock()
	defer c.usersMu.Unlock()
	if c.users != nil {
		_ = c.users.Remove()
		c.users = nil
	}
}

// userPart is one side of a --user value: a number or a name.
var userPart = regexp.MustCompile(`^([0-9]+|[A-Za-z_][A-Za-z0-9_.-]*)$`)

// CheckUser refuses a Config.User that `run --user` would not take, and
// root, whose sandboxes would be charged to (and could read what is open
// to) host root.
func CheckUser(u string) error {
	if u == "" {
		return nil
	}
	name, group, hasGroup := strings.Cut(u, ":")
	if !userPart.MatchString(name) || (hasGroup && !userPart.MatchString(group)) {
		return fmt.Errorf("container user %q is not UID[:GID] or NAME[:GROUP]: set MCP_BRIDGE_CONTAINER_USER (--container-user) to e.g. 65534:65534, or leave it empty to give each sandbox a host uid of its own", u)
	}
	if n, err := strconv.Atoi(name); (err == nil && n == 0) || name == "root" {
		return fmt.Errorf("container user %q is root, which is host root in a rootful container: set MCP_BRIDGE_CONTAINER_USER (--container-user) to an unprivileged uid, or leave it empty to give each sandbox a host uid of its own", u)
	}
	return nil
}
