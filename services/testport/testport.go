// Package testport picks loopback ports for servers that tests start as
// other processes, which must be told their port before they bind it.
//
// A port the kernel picks (":0") comes from the ephemeral range, which is
// also where every outgoing connection on the machine takes its local
// port: between the moment a test closes such a port and the moment its
// server binds it, a client anywhere may take it, and the server fails
// with "address already in use". So the port is taken from below that
// range, where the kernel hands nothing out on its own, and a lock file,
// held until it is released, keeps the test processes that run side by
// side from choosing the same one.
package testport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// lowest is the first port this package chooses from.
const lowest = 20000

// Reserve returns a loopback port that is free now and that no other
// caller of Reserve gets until release is called.
func Reserve() (port int, release func(), err error) {
	high := ephemeralLow()
	if high-lowest < 1000 {
		p, err := kernelPort() // an unusual range: the kernel's choice
		return p, func() {}, err
	}
	return reserve(func() int { return lowest + rand.IntN(high-lowest) })
}

// reserve tries the ports next gives until one is free and not held.
func reserve(next func() int) (port int, release func(), err error) {
	dir := filepath.Join(os.TempDir(), "codeexec-test-ports")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, nil, err
	}
	for range 200 {
		port := next()
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return 0, nil, err
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			_ = f.Close() // another test holds it
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			_ = f.Close() // in use by something else
			continue
		}
		_ = l.Close()
		return port, func() { _ = f.Close() }, nil
	}
	return 0, nil, errors.New("testport: no free port found in 200 tries")
}

// Addr is Reserve for the test tb: "127.0.0.1:port", released when tb
// ends.
func Addr(tb testing.TB) string {
	tb.Helper()
	port, release, err := Reserve()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(release)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// ephemeralLow is the first port of the kernel's ephemeral range, or 0.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testport: pick a free port: %w", err)
	}
	defer l.Close()
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("testport: %s is not a TCP address", l.Addr())
	}
	return a.Port, nil
}
