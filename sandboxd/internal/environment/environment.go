// Package environment keeps the named Python environments sandboxes run
// in: read-only root file systems, each with its own Python and packages,
// built from Debian (debootstrap) and optional wheels, and named by their
// content. bwrap, the fork server and the container images all run the
// same tree, so a session behaves the same on every runtime and replica.
//
// A store is one directory:
//
//	ids/ID/root           the root file system
//	ids/ID/manifest.json  what it holds (Manifest); written last
//	names/NAME            a symbolic link to ../ids/ID
//	manifests/ID.json     a copy of each manifest, kept after a removal,
//	                      so that a restore can say what changed
//	build-*/              builds under way; never used
//
// An environment is complete once its manifest is in ids/ID and a name
// links to it: a half-built one has neither, so it is never used.
package environment

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// DefaultDir is where environments live unless CODEEXEC_ENV_DIR says
// otherwise: machine-wide, as every sandboxd and every user shares them.
const DefaultDir = "/var/lib/codeexec/environments"

// DefaultName is the environment `codeexec env build` builds without a
// name, and the one sandboxd uses, when it is built, without --env.
const DefaultName = "default"

// Host names no environment: the host's /usr, bound read-only, as
// sandboxes ran before environments. Its ID is Host too.
const Host = "host"

// ErrNotFound means no environment has the name or ID asked for.
var ErrNotFound = errors.New("environment not found")

// formatVersion is the manifest's format; a store's manifests of another
// format are listed but not used.
const formatVersion = 1

// recipe counts the changes to what a build makes of the same packages
// (what it trims, what it configures): it is part of the ID, so that a
// tree made another way is another environment.
const recipe = 4

// Manifest says what an environment holds. Its ID is a hash of what it
// holds (Suite, Debs, Dists), so two builds that installed the same
// versions have the same ID.
type Manifest struct {
	Format int    `json:"format"`
	ID     string `json:"id"`
	// Name is the name it was built under.
	Name string `json:"name"`
	// Suite is the Debian release, e.g. "trixie"; Python its version.
	Suite  string `json:"suite"`
	Python string `json:"python"`
	// Apt and Wheels are what the build was asked for, beside the
	// packages every environment gets.
	Apt    []string `json:"apt,omitempty"`
	Wheels []string `json:"wheels,omitempty"`
	// Debs are the Debian packages installed, name → version; Dists the
	// Python distributions importable, name → version.
	Debs  map[string]string `json:"debs"`
	Dists map[string]string `json:"dists"`
	// Preload are the modules the fork server imports before it forks.
	Preload []string `json:"preload,omitempty"`
	// Bytes is the root file system's size; BuildSeconds how long the
	// build took; Built when it ended.
	Bytes        int64     `json:"bytes"`
	BuildSeconds float64   `json:"build_seconds"`
	Built        time.Time `json:"built"`
}

// computeID hashes what the environment holds.
func (m *Manifest) computeID() string {
	h := sha256.New()
	fmt.Fprintf(h, "codeexec environment %d recipe %d\nsuite %s\n", formatVersion, recipe, m.Suite)
	for _, k := range slices.Sorted(maps.Keys(m.Debs)) {
		fmt.Fprintf(h, "deb %s %s\n", k, m.Debs[k])
	}
	for _, k := range slices.Sorted(maps.Keys(m.Dists)) {
		fmt.Fprintf(h, "dist %s %s\n", k, m.Dists[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Env is one built environment.
type Env struct {
	// Name is the name it was found by ("" when found by ID alone).
	Name string
	// Dir holds root/ and manifest.json; Root is the root file system.
	Dir, Root string
	Manifest
}

// Label is how messages name e: "default (3f2a9c0e1b2d4a5f)".
func (e *Env) Label() string {
	if e.Name == "" {
		return e.ID
	}
	return e.Name + " (" + e.ID + ")"
}

// Store is a directory of environments.
type Store struct {
	// Dir is the store's directory, DefaultDir unless set.
	Dir string
}

// Open returns the store in dir ("" is DefaultDir).
func Open(dir string) *Store {
	if dir == "" {
		dir = DefaultDir
	}
	return &Store{Dir: dir}
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// CheckName reports a name that cannot name an environment, saying what
// a name may be.
func CheckName(name string) error {
	switch {
	case name == Host:
		return fmt.Errorf("environment name %q is taken: it means the host's /usr, without an environment; choose another", name)
	case !namePattern.MatchString(name):
		return fmt.Errorf("environment name %q is not accepted: use 1 to 63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit, e.g. %q", name, "data2")
	}
	return nil
}

// Get returns the environment a name (or an ID) names.
func (s *Store) Get(name string) (*Env, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	id, err := os.Readlink(filepath.Join(s.Dir, "names", name))
	switch {
	case err == nil:
		return s.load(name, filepath.Base(id))
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("environment %s: %w", name, err)
	}
	if e, err := s.load("", name); err == nil {
		return e, nil
	}
	return nil, s.notFound(name)
}

// notFound says that name is not built, and which are.
func (s *Store) notFound(name string) error {
	have := "none is built"
	if names, _ := s.names(); len(names) > 0 {
		have = "built: " + strings.Join(slices.Sorted(maps.Keys(names)), ", ")
	}
	build := "codeexec env build"
	if name != DefaultName {
		build += " " + name
	}
	return fmt.Errorf("%w: no environment %q in %s (%s): build it with `%s`, or pick another with --env (CODEEXEC_ENV), or --env host for the host's /usr",
		ErrNotFound, name, s.Dir, have, build)
}

// load reads the manifest of the environment with ID id.
func (s *Store) load(name, id string) (*Env, error) {
	if !namePattern.MatchString(id) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	dir := filepath.Join(s.Dir, "ids", id)
	m, err := readManifest(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("environment %s: %w", cmpOr(name, id), err)
	}
	if m.ID != id {
		return nil, fmt.Errorf("environment %s: its manifest names ID %s, not %s: rebuild it", cmpOr(name, id), m.ID, id)
	}
	return &Env{Name: name, Dir: dir, Root: filepath.Join(dir, "root"), Manifest: *m}, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func readManifest(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if m.Format != formatVersion {
		return nil, fmt.Errorf("%s has format %d; this codeexec reads %d: rebuild the environment", path, m.Format, formatVersion)
	}
	return &m, nil
}

// Manifest returns the manifest of the environment with ID id, also one
// that was removed since (manifests/ keeps a copy).
func (s *Store) Manifest(id string) (*Manifest, error) {
	if !namePattern.MatchString(id) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if m, err := readManifest(filepath.Join(s.Dir, "ids", id, "manifest.json")); err == nil {
		return m, nil
	}
	m, err := readManifest(filepath.Join(s.Dir, "manifests", id+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return m, err
}

// names maps each name to the ID it links to.
func (s *Store) names() (map[string]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.Dir, "names"))
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if id, err := os.Readlink(filepath.Join(s.Dir, "names", e.Name())); err == nil {
			out[e.Name()] = filepath.Base(id)
		}
	}
	return out, nil
}

// Listed is one line of List: an environment and its names.
type Listed struct {
	*Env
	// Names are the names linking to it; none for a tree that a rebuild
	// replaced, kept for sandboxes that may still run in it.
	Names []string
}

// List returns every complete environment, named ones first.
func (s *Store) List() ([]Listed, error) {
	names, err := s.names()
	if err != nil {
		return nil, fmt.Errorf("list environments in %s: %w", s.Dir, err)
	}
	byID := map[string][]string{}
	for n, id := range names {
		byID[id] = append(byID[id], n)
	}
	entries, err := os.ReadDir(filepath.Join(s.Dir, "ids"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("list environments in %s: %w", s.Dir, err)
	}
	var out []Listed
	for _, e := range entries {
		env, err := s.load("", e.Name())
		if err != nil {
			continue // a build's leftovers, or another format
		}
		ns := slices.Sorted(slices.Values(byID[e.Name()]))
		if len(ns) > 0 {
			env.Name = ns[0]
		}
		out = append(out, Listed{Env: env, Names: ns})
	}
	slices.SortFunc(out, func(a, b Listed) int {
		switch {
		case len(a.Names) > 0 && len(b.Names) == 0:
			return -1
		case len(a.Names) == 0 && len(b.Names) > 0:
			return 1
		}
		return strings.Compare(a.Name+a.ID, b.Name+b.ID)
	})
	return out, nil
}

// Remove deletes the name nameOrID, and the tree it named unless another
// name links to it; an ID (of a tree no name links to) deletes that
// tree. It returns what it removed. Sandboxes running in a removed tree
// break: stop the codeexec processes using it first.
func (s *Store) Remove(nameOrID string) (string, error) {
	if err := CheckName(nameOrID); err != nil {
		return "", err
	}
	if _, err := os.Stat(s.Dir); err != nil {
		return "", s.notFound(nameOrID)
	}
	unlock, err := s.lock()
	if err != nil {
		return "", err
	}
	defer unlock()
	names, err := s.names()
	if err != nil {
		return "", err
	}
	id, named := names[nameOrID]
	if named {
		if err := os.Remove(filepath.Join(s.Dir, "names", nameOrID)); err != nil {
			return "", fmt.Errorf("remove environment %s: %w", nameOrID, err)
		}
		delete(names, nameOrID)
	} else {
		id = nameOrID
		if _, err := os.Stat(filepath.Join(s.Dir, "ids", id)); err != nil {
			return "", s.notFound(nameOrID)
		}
	}
	for n, other := range names {
		if other == id {
			return fmt.Sprintf("name %s (its tree %s stays: %s links to it)", nameOrID, id, n), nil
		}
	}
	if err := os.RemoveAll(filepath.Join(s.Dir, "ids", id)); err != nil {
		return "", fmt.Errorf("remove environment %s: %w", nameOrID, err)
	}
	if named {
		return fmt.Sprintf("%s (%s)", nameOrID, id), nil
	}
	return id, nil
}
