package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Mount is a host directory an operator exposes in every sandbox
// (`codeexec serve --mount`): read-only unless Writable.
type Mount struct {
	// Host is the host directory, absolute and with symbolic links
	// resolved.
	Host string
	// Sandbox is where it appears inside the sandbox.
	Sandbox string
	// Writable makes it writable by the sandbox (":rw").
	Writable bool
}

// String is the mount as --mount takes it.
func (m Mount) String() string {
	s := m.Host + ":" + m.Sandbox
	if m.Writable {
		s += ":rw"
	}
	return s
}

// MountsDir is where mounts go in a sandbox: a tmpfs of its own in an
// environment, whose read-only tree has only the empty directory, so that
// any path below it can be made.
const MountsDir = "/mnt"

// ParseMount reads HOST_DIR[:SANDBOX_DIR][:rw|:ro]. The sandbox path
// defaults to /mnt/<basename of HOST_DIR>. The host directory must exist
// and be a directory; its symbolic links are resolved.
func ParseMount(spec string) (Mount, error) {
	parts := strings.Split(spec, ":")
	m := Mount{}
	if n := len(parts); n > 1 && (parts[n-1] == "rw" || parts[n-1] == "ro") {
		m.Writable = parts[n-1] == "rw"
		parts = parts[:n-1]
	}
	if len(parts) == 0 || len(parts) > 2 || parts[0] == "" {
		return Mount{}, fmt.Errorf("mount %q: write HOST_DIR, HOST_DIR:SANDBOX_DIR, or either with :rw (read-write) or :ro (the default) after it", spec)
	}
	if !filepath.IsAbs(parts[0]) {
		return Mount{}, fmt.Errorf("mount %q: the host directory %q is not an absolute path", spec, parts[0])
	}
	host, err := filepath.EvalSymlinks(parts[0])
	if err != nil {
		return Mount{}, fmt.Errorf("mount %q: the host directory: %w", spec, err)
	}
	fi, err := os.Stat(host)
	if err != nil {
		return Mount{}, fmt.Errorf("mount %q: the host directory: %w", spec, err)
	}
	if !fi.IsDir() {
		return Mount{}, fmt.Errorf("mount %q: %s is not a directory; mount the directory that holds it", spec, parts[0])
	}
	m.Host = host
	m.Sandbox = "/mnt/" + filepath.Base(host)
	if len(parts) == 2 {
		m.Sandbox = parts[1]
	}
	// Below /mnt only: the rest of the sandbox's tree is its own (/usr,
	// /etc, /tmp, the checkpointed /workspace), and an environment's tree
	// is read-only everywhere else.
	if !filepath.IsAbs(m.Sandbox) || filepath.Clean(m.Sandbox) != m.Sandbox || !strings.HasPrefix(m.Sandbox, MountsDir+"/") {
		return Mount{}, fmt.Errorf("mount %q: the sandbox path %q must be a clean absolute path below %s, such as %s/data", spec, m.Sandbox, MountsDir, MountsDir)
	}
	return m, nil
}

// CheckMounts refuses mounts that share a sandbox path, or whose host
// directory overlaps one of protected (the state dir: the store, tokens
// and sockets must never be visible in a sandbox).
func CheckMounts(mounts []Mount, protected ...string) error {
	var errs []error
	seen := map[string]string{}
	for _, m := range mounts {
		for other, host := range seen {
			if within(m.Sandbox, other) || within(other, m.Sandbox) {
				errs = append(errs, fmt.Errorf("mounts of %s and %s overlap in the sandbox at %s and %s; give them separate paths", host, m.Host, other, m.Sandbox))
			}
		}
		seen[m.Sandbox] = m.Host
		for _, p := range protected {
			if p == "" {
				continue
			}
			dir, err := filepath.EvalSymlinks(p)
			if err != nil {
				dir = filepath.Clean(p)
			}
			if within(m.Host, dir) || within(dir, m.Host) {
				errs = append(errs, fmt.Errorf("mount of %s overlaps the state directory %s, which holds the store and the tokens; mount a directory outside it", m.Host, dir))
			}
		}
	}
	return errors.Join(errs...)
}

// within reports whether p is dir or lies under it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
