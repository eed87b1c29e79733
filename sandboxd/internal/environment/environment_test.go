package environment

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeEnv writes a complete environment (a manifest and an empty root)
// into s under name, as a build leaves it, and returns its ID.
func fakeEnv(t *testing.T, s *Store, name string, dists map[string]string) string {
	t.Helper()
	m := &Manifest{Format: formatVersion, Name: name, Suite: Suite, Python: "3.13.5", Debs: map[string]string{"python3": "3.13.5-1"}, Dists: dists}
	m.ID = m.computeID()
	dir := filepath.Join(s.Dir, "ids", m.ID)
	for _, d := range []string{filepath.Join(dir, "root"), filepath.Join(s.Dir, "names"), filepath.Join(s.Dir, "manifests")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := json.Marshal(m)
	for _, p := range []string{filepath.Join(dir, "manifest.json"), filepath.Join(s.Dir, "manifests", m.ID+".json")} {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(s.Dir, "names", name)
	_ = os.Remove(link)
	if err := os.Symlink(filepath.Join("..", "ids", m.ID), link); err != nil {
		t.Fatal(err)
	}
	return m.ID
}

func TestStoreGetListRemove(t *testing.T) {
	t.Parallel()
	s := Open(t.TempDir())
	a := fakeEnv(t, s, "default", map[string]string{"numpy": "2.2.4"})
	b := fakeEnv(t, s, "data2", map[string]string{"numpy": "2.2.4", "toolz": "1.0.0"})
	if a == b {
		t.Fatal("two environments with other packages have one ID")
	}
	env, err := s.Get("data2")
	if err != nil || env.ID != b || env.Root != filepath.Join(s.Dir, "ids", b, "root") {
		t.Fatalf("Get(data2) = %+v, %v", env, err)
	}
	if byID, err := s.Get(a); err != nil || byID.ID != a {
		t.Fatalf("Get by ID: %+v, %v", byID, err)
	}
	_, err = s.Get("nope")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "codeexec env build nope") || !strings.Contains(err.Error(), "built: data2, default") {
		t.Fatalf("Get(nope) = %v; want ErrNotFound naming the command and the environments built", err)
	}
	// A half-built tree (no manifest) is never used.
	if err := os.MkdirAll(filepath.Join(s.Dir, "ids", "0123456789abcdef", "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil || len(list) != 2 || list[0].Name != "data2" || list[1].Name != "default" {
		t.Fatalf("List = %+v, %v; want data2 and default only", list, err)
	}
	what, err := s.Remove("data2")
	if err != nil || !strings.Contains(what, b) {
		t.Fatalf("Remove(data2) = %q, %v", what, err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "ids", b)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the removed environment's tree is still there: %v", err)
	}
	if m, err := s.Manifest(b); err != nil || m.Dists["toolz"] != "1.0.0" {
		t.Errorf("the removed environment's manifest is not kept for restores: %v", err)
	}
	if _, err := s.Remove("data2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("removing it again: %v, want ErrNotFound", err)
	}
}

func TestCheckName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, want string }{
		{"default", ""}, {"data-2.1_x", ""},
		{"host", "it means the host's /usr"},
		{"Data", "lower-case"}, {"", "lower-case"}, {"../x", "lower-case"}, {"-x", "lower-case"},
	} {
		err := CheckName(tc.name)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckName(%q) = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestWheelFits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ wheel, want string }{
		{"toolz-1.0.0-py3-none-any.whl", ""},
		{"numpy-2.2.4-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", ""},
		{"cryptography-44.0.0-cp39-abi3-manylinux_2_28_x86_64.whl", ""},
		{"numpy-2.2.4-cp311-cp311-manylinux_2_17_x86_64.whl", "not for Python 3.13"},
		{"numpy-2.2.4-cp313-cp313-win_amd64.whl", "not x86-64 Linux"},
		{"numpy-2.2.4-cp313-cp313-musllinux_1_2_x86_64.whl", "not x86-64 Linux"},
		{"notawheel.whl", "not a wheel file name"},
	} {
		err := wheelFits(tc.wheel)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("wheelFits(%s) = %v, want %q", tc.wheel, err, tc.want)
		}
	}
}

func TestChange(t *testing.T) {
	t.Parallel()
	manifests := map[string]*Manifest{
		"a": {Name: "default", Python: "3.13.5", Dists: map[string]string{"numpy": "2.2.4", "pandas": "2.2.3", "seaborn": "0.13.2"}},
		"b": {Name: "data2", Python: "3.13.5", Dists: map[string]string{"numpy": "2.3.0", "pandas": "2.2.3", "toolz": "1.0.0"}},
	}
	lookup := func(id string) (*Manifest, error) {
		if m, ok := manifests[id]; ok {
			return m, nil
		}
		return nil, ErrNotFound
	}
	for _, tc := range []struct{ from, to, want string }{
		{"a", "a", ""},
		{"", "a", ""},
		{"a", "b", "the checkpoint was made in environment default (a) and is restored into data2 (b): numpy 2.2.4 → 2.3.0, +toolz 1.0.0, −seaborn 0.13.2"},
		{"zz", "b", "the checkpoint was made in environment zz and is restored into data2 (b) (this machine does not have the first one's manifest, so what changed is not known)"},
		{"a", Host, "the checkpoint was made in environment default (a) and is restored into host (the host's /usr): imported modules may be missing or of other versions"},
	} {
		if got := Change(tc.from, tc.to, lookup); got != tc.want {
			t.Errorf("Change(%q, %q) =\n%q\nwant\n%q", tc.from, tc.to, got, tc.want)
		}
	}
}

// Bad input to a build fails before anything is made, saying what to do.
func TestBuildRefusesBadInput(t *testing.T) {
	t.Parallel()
	s := Open(filepath.Join(t.TempDir(), "envs"))
	wheels := t.TempDir()
	if err := os.WriteFile(filepath.Join(wheels, "numpy-2.2.4-cp311-cp311-manylinux_2_17_x86_64.whl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec BuildSpec
		want string
	}{
		{BuildSpec{Name: "host"}, "is taken"},
		{BuildSpec{Name: "x", Apt: []string{"-o=APT::x"}}, "is not a Debian package name"},
		{BuildSpec{Name: "x", Wheels: wheels}, "not for Python 3.13"},
		{BuildSpec{Name: "x", Wheels: filepath.Join(wheels, "none")}, "is not a directory"},
		{BuildSpec{Name: "x", Requirements: filepath.Join(wheels, "none.txt")}, "--requirements"},
	} {
		_, err := s.Build(t.Context(), tc.spec, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build(%+v) = %v, want %q", tc.spec, err, tc.want)
		}
	}
	if _, err := os.Stat(s.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused build made %s: %v", s.Dir, err)
	}
}

// A build where the disk is nearly full fails before it starts, saying
// how much is free and how much it needs, and leaves nothing behind.
func TestBuildRefusesAFullDisk(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a small tmpfs: run it as root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatalf("mount a 64 MiB tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	s := Open(filepath.Join(dir, "envs"))
	_, err := s.Build(t.Context(), BuildSpec{Name: "x", CacheDir: filepath.Join(dir, "cache")}, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "not enough free disk for a build at "+s.Dir) || !strings.Contains(err.Error(), "a build needs about 3072 MiB") {
		t.Fatalf("Build on a 64 MiB disk = %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused build left %v", entries)
	}
}
