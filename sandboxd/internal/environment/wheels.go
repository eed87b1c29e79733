package environment

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// checkWheels reports a wheels directory without wheels, or a wheel that
// the environment's Python (CPython PythonVersion on x86-64 Linux) cannot
// install, saying which wheel to get instead.
func checkWheels(dir string) error {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("--wheels %s is not a directory: give a directory of .whl files (pip download -d DIR --python-version %s --only-binary=:all: PACKAGE makes one)", dir, PythonVersion)
	}
	wheels, _ := filepath.Glob(filepath.Join(dir, "*.whl"))
	if len(wheels) == 0 {
		return fmt.Errorf("--wheels %s holds no .whl file: pip download -d %s --python-version %s --only-binary=:all: PACKAGE fills it", dir, dir, PythonVersion)
	}
	for _, w := range wheels {
		if err := wheelFits(filepath.Base(w)); err != nil {
			return err
		}
	}
	return nil
}

// wheelFits checks a wheel's file name tags (PEP 427: name-version[-build]-
// python-abi-platform.whl) against CPython PythonVersion on x86-64 Linux.
func wheelFits(name string) error {
	parts := strings.Split(strings.TrimSuffix(name, ".whl"), "-")
	if len(parts) < 5 {
		return fmt.Errorf("wheel %s: not a wheel file name (name-version-python-abi-platform.whl)", name)
	}
	py, abi, plat := parts[len(parts)-3], parts[len(parts)-2], parts[len(parts)-1]
	cp := "cp" + strings.ReplaceAll(PythonVersion, ".", "")
	pyOK, abiOK, platOK := false, false, false
	for _, t := range strings.Split(py, ".") {
		if t == "py3" || t == cp || t == "py"+cp[2:] || (abi == "abi3" && stableABIFits(t)) {
			pyOK = true
		}
	}
	for _, t := range strings.Split(abi, ".") {
		if t == "none" || t == "abi3" || t == cp {
			abiOK = true
		}
	}
	for _, t := range strings.Split(plat, ".") {
		if t == "any" || t == "linux_x86_64" || (strings.Contains(t, "linux") && strings.HasSuffix(t, "_x86_64") && !strings.Contains(t, "musl")) {
			platOK = true
		}
	}
	switch {
	case !pyOK || !abiOK:
		return fmt.Errorf("wheel %s is built for %s/%s, not for Python %s (%s): get the %s wheel (pip download --python-version %s --only-binary=:all: …) or a pure-Python one (py3-none-any); nothing was changed",
			name, py, abi, PythonVersion, cp, cp, PythonVersion)
	case !platOK:
		return fmt.Errorf("wheel %s is built for %s, not x86-64 Linux (glibc): get a manylinux x86_64 or pure-Python wheel; nothing was changed", name, plat)
	}
	return nil
}

// stableABIFits reports whether an abi3 wheel's tag cp3N asks for a
// Python no newer than PythonVersion.
func stableABIFits(tag string) bool {
	n, err := strconv.Atoi(strings.TrimPrefix(tag, "cp3"))
	_, want, _ := strings.Cut(PythonVersion, ".")
	w, _ := strconv.Atoi(want)
	return strings.HasPrefix(tag, "cp3") && err == nil && n <= w
}
