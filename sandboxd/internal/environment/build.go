package environment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultCacheDir keeps what builds download: the .debs, and the
// debootstrapped base of each suite and mirror, so that a second build
// downloads nothing it already has.
const DefaultCacheDir = "/var/cache/codeexec"

// Suite is the Debian release environments are built from, and Python
// the version it ships.
const (
	Suite         = "trixie"
	PythonVersion = "3.13"
)

// DefaultPackages are the Debian packages of every environment: the data
// stack an agent working on tool output needs, chosen against Anthropic's
// and E2B's sandboxes (docs/ENVIRONMENTS.md says why each is here).
var DefaultPackages = []string{
	"python3", "ca-certificates", "tzdata", "fonts-dejavu-core",
	// numbers and data frames, statistics, learning, symbolic math
	"python3-numpy", "python3-pandas", "python3-scipy", "python3-sklearn", "python3-sympy", "python3-networkx",
	// charts and images
	"python3-matplotlib", "python3-seaborn", "python3-pil",
	// spreadsheets and documents
	"python3-openpyxl", "python3-xlsxwriter", "python3-xlrd", "python3-pypdf", "python3-docx", "python3-reportlab",
	// HTML, XML, YAML, dates, tables, encodings
	"python3-lxml", "python3-bs4", "python3-html5lib", "python3-yaml", "python3-dateutil", "python3-tabulate", "python3-chardet",
}

// preloadCandidates are the modules the fork server imports before it
// forks, when the environment has them: the slow imports of the data
// stack (pandas alone takes most of a second cold).
var preloadCandidates = []struct{ dist, module string }{
	{"numpy", "numpy"}, {"pandas", "pandas"}, {"scipy", "scipy"},
	{"matplotlib", "matplotlib"}, {"matplotlib", "matplotlib.pyplot"}, {"pillow", "PIL.Image"},
}

// BuildSpec is what to build.
type BuildSpec struct {
	// Name names the environment (DefaultName when "").
	Name string
	// Apt are Debian packages beyond DefaultPackages.
	Apt []string
	// Wheels is a directory of wheels to install with pip, all of them
	// (or those Requirements names, found only there).
	Wheels string
	// Requirements is a pip requirements file, installed from Wheels, or
	// from the package index when Wheels is "".
	Requirements string
	// Mirror is the Debian mirror; "" is the one apt uses here.
	Mirror string
	// CacheDir is DefaultCacheDir unless set.
	CacheDir string
}

// minFreeBytes is the free disk a build needs where the store and the
// cache are: the default environment's tree is about 700 MiB, its .debs
// 150 MiB, the cached base 250 MiB, and the build's own copy of each.
const minFreeBytes = 3 << 30

var aptName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?$`)

// check reports what is wrong with spec or this host before anything is
// changed, saying what to do.
func (s *Store) check(spec *BuildSpec) error {
	if err := CheckName(spec.Name); err != nil {
		return err
	}
	for _, p := range spec.Apt {
		if !aptName.MatchString(p) {
			return fmt.Errorf("--apt %q is not a Debian package name: give names such as python3-polars, or name=version", p)
		}
	}
	if os.Geteuid() != 0 {
		return errors.New("env build needs root (debootstrap and chroot): run it as root, e.g. `sudo codeexec env build`")
	}
	for _, tool := range []string{"debootstrap", "chroot", "unshare", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			pkg := map[string]string{"debootstrap": "debootstrap", "chroot": "coreutils", "unshare": "util-linux", "tar": "tar"}[tool]
			return fmt.Errorf("env build needs %s, which is not installed: run `apt-get install %s`", tool, pkg)
		}
	}
	if spec.Wheels != "" {
		if err := checkWheels(spec.Wheels); err != nil {
			return err
		}
	}
	if spec.Requirements != "" {
		if _, err := os.ReadFile(spec.Requirements); err != nil {
			return fmt.Errorf("--requirements: %w", err)
		}
	}
	for _, dir := range []string{s.Dir, spec.CacheDir} {
		if err := checkFree(dir); err != nil {
			return err
		}
	}
	return nil
}

// checkFree reports too little free disk where dir is (or would be).
func checkFree(dir string) error {
	p := dir
	for {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err == nil {
			free := int64(st.Bavail) * st.Bsize
			if free < minFreeBytes {
				return fmt.Errorf("not enough free disk for a build at %s: %d MiB free, a build needs about %d MiB: free some space, or build elsewhere (--env-dir, CODEEXEC_ENV_DIR; --cache-dir)",
					dir, free>>20, minFreeBytes>>20)
			}
			return nil
		}
		if parent := filepath.Dir(p); parent != p {
			p = parent
			continue
		}
		return nil
	}
}

// Build builds spec's environment, saying on progress what it does, and
// names it spec.Name. Nothing in the store changes until the new tree is
// complete: a failed or interrupted build leaves only a build-* directory,
// which the next build removes.
func (s *Store) Build(ctx context.Context, spec BuildSpec, progress io.Writer) (*Env, error) {
	if spec.Name == "" {
		spec.Name = DefaultName
	}
	if spec.CacheDir == "" {
		spec.CacheDir = DefaultCacheDir
	}
	if spec.Mirror == "" {
		spec.Mirror = Mirror()
	}
	if err := s.check(&spec); err != nil {
		return nil, err
	}
	for _, d := range []string{s.Dir, filepath.Join(s.Dir, "ids"), filepath.Join(s.Dir, "names"), filepath.Join(s.Dir, "manifests"), spec.CacheDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("env build: %w", err)
		}
	}
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	s.removeStaleBuilds(progress)
	b := &builder{store: s, spec: spec, out: progress, start: time.Now()}
	if b.dir, err = os.MkdirTemp(s.Dir, "build-"); err != nil {
		return nil, fmt.Errorf("env build: %w", err)
	}
	defer os.RemoveAll(b.dir)
	b.root = filepath.Join(b.dir, "root")
	env, err := b.run(ctx)
	if err != nil {
		return nil, fmt.Errorf("env build %s: %w", spec.Name, diskFull(err, s.Dir))
	}
	return env, nil
}

// diskFull adds what to do to an error that a full disk caused.
func diskFull(err error, dir string) error {
	if errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "No space left on device") {
		return fmt.Errorf("%w (the disk is full: free some space at %s and build again; nothing was changed)", err, dir)
	}
	return err
}

// lock takes the store's lock for a build or a removal.
func (s *Store) lock() (func(), error) {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("environment store: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(s.Dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("environment store: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("another env build or env rm is running on %s: wait for it to end", s.Dir)
	}
	return func() { _ = f.Close() }, nil
}

// removeStaleBuilds removes what interrupted builds left.
func (s *Store) removeStaleBuilds(progress io.Writer) {
	old, _ := filepath.Glob(filepath.Join(s.Dir, "build-*"))
	for _, d := range old {
		fmt.Fprintf(progress, "removing %s, left by an interrupted build\n", d)
		_ = os.RemoveAll(d)
	}
}

// Mirror is the Debian mirror apt uses on this host (deb.debian.org when
// none is found): it is reachable wherever apt-get works.
func Mirror() string {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*")
	for _, f := range append([]string{"/etc/apt/sources.list"}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			fields := strings.Fields(line)
			var uri string
			switch {
			case len(fields) >= 2 && fields[0] == "URIs:":
				uri = fields[1]
			case len(fields) >= 2 && fields[0] == "deb":
				uri = fields[1]
				if strings.HasPrefix(uri, "[") {
					for i, f := range fields {
						if strings.HasSuffix(f, "]") && i+1 < len(fields) {
							uri = fields[i+1]
							break
						}
					}
				}
			}
			if strings.HasPrefix(uri, "http") && !strings.Contains(uri, "security") {
				return uri
			}
		}
	}
	return "http://deb.debian.org/debian"
}
