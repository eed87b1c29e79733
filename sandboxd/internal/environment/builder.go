package environment

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// builder is one build under way, in dir (a build-* directory of the
// store), with its root file system at root.
type builder struct {
	store     *Store
	spec      BuildSpec
	out       io.Writer
	start     time.Time
	dir, root string
}

func (b *builder) stepf(format string, args ...any) {
	fmt.Fprintf(b.out, "[%5.1fs] %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
}

func (b *builder) run(ctx context.Context) (*Env, error) {
	if err := b.base(ctx); err != nil {
		return nil, err
	}
	pkgs := slices.Concat(DefaultPackages, b.spec.Apt)
	pip := b.spec.Wheels != "" || b.spec.Requirements != ""
	if pip {
		pkgs = append(pkgs, "python3-pip")
	}
	if err := b.apt(ctx, pkgs); err != nil {
		return nil, err
	}
	if pip {
		if err := b.pip(ctx); err != nil {
			return nil, err
		}
	}
	m, err := b.inspect(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.finish(); err != nil {
		return nil, err
	}
	return b.install(m)
}

// base makes the root file system of Debian's minimal base with Python,
// from the cached tarball of this suite and mirror, or with debootstrap,
// caching its result.
func (b *builder) base(ctx context.Context) error {
	sum := sha256.Sum256([]byte(Suite + " " + b.spec.Mirror))
	tarball := filepath.Join(b.spec.CacheDir, "base-"+Suite+"-"+hex.EncodeToString(sum[:])[:12]+".tar")
	if err := os.Mkdir(b.root, 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(tarball); err == nil {
		b.stepf("unpacking the cached Debian %s base (%s)", Suite, tarball)
		if err := b.cmd(ctx, nil, "tar", "-C", b.root, "-xf", tarball); err == nil {
			return nil
		}
		b.stepf("the cached base is damaged: removing it and debootstrapping again")
		_ = os.Remove(tarball)
		_ = os.RemoveAll(b.root)
		_ = os.Mkdir(b.root, 0o755)
	}
	debs := filepath.Join(b.spec.CacheDir, "debs")
	if err := os.MkdirAll(filepath.Join(debs, "partial"), 0o755); err != nil {
		return err
	}
	b.stepf("debootstrap --variant=minbase %s from %s (.debs cached in %s)", Suite, b.spec.Mirror, debs)
	if err := b.cmd(ctx, debootstrapPhases, "debootstrap", "--variant=minbase", "--include=python3", "--cache-dir="+debs,
		Suite, b.root, b.spec.Mirror); err != nil {
		return fmt.Errorf("debootstrap %s from %s: %w", Suite, b.spec.Mirror, err)
	}
	_ = removeAll(b.root, "var/cache/apt/archives/*.deb")
	b.stepf("caching the base as %s", tarball)
	if err := b.cmd(ctx, nil, "tar", "-C", b.root, "-cf", tarball+".part", "."); err != nil {
		_ = os.Remove(tarball + ".part")
		return fmt.Errorf("cache the base: %w", err)
	}
	return os.Rename(tarball+".part", tarball)
}

var unknownPackage = regexp.MustCompile(`(?m)^E: (?:Unable to locate package |Package '?)([^\s']+)`)

// apt installs pkgs in the root, checking first that Debian has each.
func (b *builder) apt(ctx context.Context, pkgs []string) error {
	b.stepf("checking that Debian %s has the %d packages asked for", Suite, len(pkgs))
	var out bytes.Buffer
	sim := append([]string{"apt-get", "install", "--simulate", "-q", "--no-install-recommends"}, pkgs...)
	if err := b.chroot(ctx, &out, nil, sim...); err != nil {
		if m := unknownPackage.FindAllStringSubmatch(out.String(), -1); len(m) > 0 {
			var names []string
			for _, x := range m {
				names = append(names, x[1])
			}
			return fmt.Errorf("no package %[2]s in Debian %[1]s (main): check the name with `apt-cache search WORD` on a %[1]s system, or give a Python package as a wheel (--wheels DIR) or a requirement (--requirements FILE); nothing was changed",
				Suite, strings.Join(names, ", "))
		}
		return fmt.Errorf("apt-get could not plan the install: %w: %s", err, tail(out.String(), 1500))
	}
	b.stepf("apt-get install %d packages with their dependencies (.debs cached in %s)", len(pkgs), filepath.Join(b.spec.CacheDir, "debs"))
	args := append([]string{"apt-get", "install", "-y", "-q", "--no-install-recommends", "-o", "Dpkg::Use-Pty=0"}, pkgs...)
	if err := b.chroot(ctx, b.filtered("Setting up ", "E: ", "W: ", "Need to get", "After this operation"), nil, args...); err != nil {
		return fmt.Errorf("apt-get install: %w", err)
	}
	return nil
}

// pip installs the wheels and requirements asked for.
func (b *builder) pip(ctx context.Context) error {
	args := []string{"python3", "-m", "pip", "install", "--break-system-packages", "--no-cache-dir",
		"--root-user-action=ignore", "--no-warn-script-location", "--progress-bar", "off"}
	binds := map[string]string{}
	if b.spec.Wheels != "" {
		binds[b.spec.Wheels] = "/tmp/codeexec-wheels"
		args = append(args, "--no-index", "--find-links", "/tmp/codeexec-wheels")
	}
	if b.spec.Requirements != "" {
		binds[b.spec.Requirements] = "/tmp/codeexec-requirements.txt"
		args = append(args, "-r", "/tmp/codeexec-requirements.txt")
	} else {
		wheels, _ := filepath.Glob(filepath.Join(b.spec.Wheels, "*.whl"))
		for _, w := range wheels {
			args = append(args, "/tmp/codeexec-wheels/"+filepath.Base(w))
		}
	}
	b.stepf("pip install %s", strings.Join(args[9:], " "))
	if err := b.chroot(ctx, b.filtered("Successfully", "ERROR", "Processing", "Collecting"), binds, args...); err != nil {
		return fmt.Errorf("pip install: %w", err)
	}
	return nil
}

// inspect checks that the data stack imports and computes, and makes the
// manifest of what the root holds.
func (b *builder) inspect(ctx context.Context) (*Manifest, error) {
	b.stepf("checking that the data stack imports and computes, and listing what is installed")
	var out bytes.Buffer
	if err := b.chroot(ctx, &out, nil, "python3", "-I", "-c", inspectScript); err != nil {
		return nil, fmt.Errorf("the environment's Python failed its check: %w: %s", err, tail(out.String(), 2000))
	}
	var got struct {
		Python  string            `json:"python"`
		Dists   map[string]string `json:"dists"`
		Preload []string          `json:"preload"`
	}
	if err := json.Unmarshal(lastLine(out.Bytes()), &got); err != nil {
		return nil, fmt.Errorf("the environment's Python answered %q: %w", tail(out.String(), 500), err)
	}
	out.Reset()
	if err := b.chroot(ctx, &out, nil, "dpkg-query", "-W", "-f", "${Package}\t${Version}\n"); err != nil {
		return nil, fmt.Errorf("dpkg-query: %w", err)
	}
	debs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if name, ver, ok := strings.Cut(line, "\t"); ok {
			debs[name] = ver
		}
	}
	m := &Manifest{Format: formatVersion, Name: b.spec.Name, Suite: Suite, Python: got.Python,
		Apt: b.spec.Apt, Debs: debs, Dists: got.Dists, Preload: got.Preload}
	if b.spec.Wheels != "" {
		ws, _ := filepath.Glob(filepath.Join(b.spec.Wheels, "*.whl"))
		for _, w := range ws {
			m.Wheels = append(m.Wheels, filepath.Base(w))
		}
	}
	if b.spec.Requirements != "" {
		m.Wheels = append(m.Wheels, "-r "+filepath.Base(b.spec.Requirements))
	}
	m.ID = m.computeID()
	return m, nil
}

// inspectScript runs in the new environment: it computes with the data
// stack (a build whose numpy cannot load its BLAS fails here, not in a
// session), renders a chart (which also writes matplotlib's font list),
// and prints the Python version, the distributions and the modules to
// preload.
var inspectScript = `
import importlib, importlib.metadata as md, io, json, platform
dists = {}
for d in md.distributions():
    name = d.metadata["Name"]
    if name:
        dists[name.lower().replace("_", "-")] = d.version
cands = ` + preloadList() + `
preload = []
for dist, mod in cands:
    if dist in dists:
        importlib.import_module(mod)
        preload.append(mod)
if "numpy" in dists:
    import numpy as np
    assert abs(np.linalg.solve([[2.0, 1.0], [1.0, 3.0]], [3.0, 4.0]).sum() - 2.0) < 1e-9
if "pandas" in dists:
    import pandas as pd
    assert pd.DataFrame({"a": [1, 2, 3]})["a"].sum() == 6
if "matplotlib" in dists:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.plot([1, 2, 3]); buf = io.BytesIO(); plt.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"
print(json.dumps({"python": platform.python_version(), "dists": dists, "preload": preload}))
`

func preloadList() string {
	var parts []string
	for _, c := range preloadCandidates {
		parts = append(parts, fmt.Sprintf("(%q, %q)", c.dist, c.module))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// finish trims the root to what sandboxes need and adds their mount
// points: no package lists, caches, documentation, logs or shadow files.
func (b *builder) finish() error {
	b.stepf("trimming the root (documentation, caches, shadow files) and adding the sandbox's mount points")
	for _, pattern := range []string{
		"var/cache/apt/*", "var/lib/apt/lists/*", "var/log/*", "usr/share/doc/*", "usr/share/man", "usr/share/info",
		"usr/share/locale/*", "etc/shadow*", "etc/gshadow*", "etc/passwd-", "etc/group-", "etc/resolv.conf",
		"tmp/*", "etc/machine-id",
		// What a sandbox has no use for, and what names the machine the
		// build ran on (debootstrap copies its host name): a sandbox sees
		// the same root file system whatever ran the build.
		"root", "home", "srv", "mnt", "media", "run", "sys", "var", "boot",
		"etc/hostname", "etc/localtime", "etc/timezone", "etc/ssl/private",
	} {
		if err := removeAll(b.root, pattern); err != nil {
			return err
		}
	}
	// The sandbox user's home is its workspace, as on the host's /usr.
	passwd := filepath.Join(b.root, "etc/passwd")
	if data, err := os.ReadFile(passwd); err == nil {
		fixed := strings.Replace(string(data), "nobody:x:65534:65534:nobody:/nonexistent:", "nobody:x:65534:65534:nobody:/workspace:", 1)
		if err := os.WriteFile(passwd, []byte(fixed), 0o644); err != nil { //nolint:gosec // the build's own tree, below its temporary directory
			return err
		}
	}
	// Matplotlib draws to files, never to a screen.
	rc := filepath.Join(b.root, "etc/matplotlibrc")
	if f, err := os.OpenFile(rc, os.O_APPEND|os.O_WRONLY, 0); err == nil {
		_, _ = f.WriteString("\n# codeexec: sandboxes have no display\nbackend: Agg\n")
		_ = f.Close()
	}
	// mnt is the mount point of the operator's --mount directories (an
	// empty directory that sandboxd covers with a tmpfs to bind them in).
	for dir, mode := range map[string]os.FileMode{"workspace": 0o1777, "opt/codeexec": 0o755, "tmp": 0o1777, "mnt": 0o755} {
		p := filepath.Join(b.root, dir)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
	}
	return nil
}

// install moves the finished tree into the store under its ID, keeps a
// copy of its manifest, and points the name at it.
func (b *builder) install(m *Manifest) (*Env, error) {
	size, err := treeSize(b.root)
	if err != nil {
		return nil, err
	}
	m.Bytes, m.Built = size, time.Now().UTC()
	m.BuildSeconds = time.Since(b.start).Round(100 * time.Millisecond).Seconds()
	data, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(b.dir, "manifest.json"), data, 0o644); err != nil {
		return nil, err
	}
	if err := os.Chmod(b.dir, 0o755); err != nil {
		return nil, err
	}
	final := filepath.Join(b.store.Dir, "ids", m.ID)
	if _, err := os.Stat(filepath.Join(final, "manifest.json")); err == nil {
		b.stepf("an identical environment %s is already built: naming it %s", m.ID, b.spec.Name)
	} else {
		_ = os.RemoveAll(final) // an incomplete one
		if err := os.Rename(b.dir, final); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(b.store.Dir, "manifests", m.ID+".json"), data, 0o644); err != nil {
		return nil, err
	}
	link := filepath.Join(b.store.Dir, "names", "."+b.spec.Name+".new")
	_ = os.Remove(link)
	if err := os.Symlink(filepath.Join("..", "ids", m.ID), link); err != nil {
		return nil, err
	}
	if err := os.Rename(link, filepath.Join(b.store.Dir, "names", b.spec.Name)); err != nil {
		return nil, err
	}
	b.stepf("built %s: Python %s, %d Debian packages, %d Python packages, %d MiB, in %.0f s",
		b.spec.Name+" ("+m.ID+")", m.Python, len(m.Debs), len(m.Dists), m.Bytes>>20, m.BuildSeconds)
	return b.store.Get(b.spec.Name)
}

// chroot runs argv in the root, in a mount namespace of its own (so that
// nothing it mounts outlives it) with /proc, the .deb cache and binds
// (host path → path in the root) mounted.
func (b *builder) chroot(ctx context.Context, out io.Writer, binds map[string]string, argv ...string) error {
	debs := filepath.Join(b.spec.CacheDir, "debs")
	script := `set -e
r=$1; debs=$2; shift 2
mount -t proc none "$r/proc"
mount --bind "$debs" "$r/var/cache/apt/archives"
while [ "$1" != -- ]; do mkdir -p "$r$2"; [ -d "$1" ] || { rmdir "$r$2"; touch "$r$2"; }; mount --bind "$1" "$r$2"; shift 2; done
shift
[ -e "$r/etc/resolv.conf" ] || cp /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
exec chroot "$r" "$@"`
	args := []string{"--mount", "--propagation", "private", "--fork", "sh", "-c", script, "sh", b.root, debs}
	for src, dst := range binds {
		args = append(args, src, dst)
	}
	args = append(args, "--")
	cmd := exec.CommandContext(ctx, "unshare", append(args, argv...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "DEBIAN_FRONTEND=noninteractive", "HOME=/root"}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	if f, ok := out.(*lineFilter); ok {
		if last := f.tail(); err != nil {
			return fmt.Errorf("%w: %s", err, last)
		}
	}
	return err
}

// debootstrapPhases are the lines of debootstrap's that show its progress.
var debootstrapPhases = []string{"I: Retrieving Packages", "I: Resolving dependencies of base", "I: Installing core",
	"I: Configuring required", "I: Unpacking the base", "I: Configuring the base", "I: Base system", "E: ", "W: "}

// cmd runs a host command, showing the lines that start with one of show
// and keeping the rest for an error.
func (b *builder) cmd(ctx context.Context, show []string, name string, args ...string) error {
	f := b.filtered(show...)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	err := cmd.Run()
	if last := f.tail(); err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, last)
	}
	return nil
}

// filtered is a writer that shows lines starting with one of prefixes
// on the progress writer, and keeps the last lines for errors.
func (b *builder) filtered(prefixes ...string) *lineFilter {
	pr, pw := io.Pipe()
	f := &lineFilter{w: pw, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			f.last = append(f.last, line)
			if len(f.last) > 15 {
				f.last = f.last[1:]
			}
			for _, p := range prefixes {
				if strings.HasPrefix(line, p) {
					fmt.Fprintf(b.out, "         %s\n", line)
					break
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return f
}

// lineFilter is what filtered returns.
type lineFilter struct {
	w    *io.PipeWriter
	done chan struct{}
	last []string
}

func (f *lineFilter) Write(p []byte) (int, error) { return f.w.Write(p) }

// tail closes the writer and returns its last lines.
func (f *lineFilter) tail() string {
	_ = f.w.Close()
	<-f.done
	return strings.Join(f.last, "\n")
}

func removeAll(root, pattern string) error {
	matches, err := filepath.Glob(filepath.Join(root, pattern))
	if err != nil {
		return err
	}
	for _, m := range matches {
		if err := os.RemoveAll(m); err != nil {
			return err
		}
	}
	return nil
}

func treeSize(root string) (int64, error) {
	var n int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
