package testport

import (
	"net"
	"strconv"
	"testing"
)

// TestReservedPortsAreDistinctAndOutsideTheEphemeralRange holds many
// ports at once: none is handed out twice, and each is below the
// kernel's ephemeral range and can be bound.
func TestReservedPortsAreDistinctAndOutsideTheEphemeralRange(t *testing.T) {
	high := ephemeralLow()
	if high-lowest < 1000 {
		t.Fatalf("this machine's ephemeral range starts at %d; the test expects one that leaves ports %d and up below it", high, lowest)
	}
	seen := map[int]func(){}
	for range 300 {
		port, release, err := Reserve()
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := seen[port]; dup {
			t.Fatalf("port %d handed out twice while held", port)
		}
		if port < lowest || port >= high {
			t.Fatalf("port %d is outside %d–%d", port, lowest, high)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("reserved port %d cannot be bound: %v", port, err)
		}
		_ = l.Close()
		seen[port] = release
	}
	for _, release := range seen {
		release()
	}
}

// TestAHeldOrBoundPortIsSkipped offers reserve a port another caller
// holds and one a server has bound, before one that was reserved and
// released: it returns the last.
func TestAHeldOrBoundPortIsSkipped(t *testing.T) {
	held, release, err := Reserve()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	bound, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer bound.Close()
	free, releaseFree, err := Reserve()
	if err != nil {
		t.Fatal(err)
	}
	releaseFree()
	offers := []int{held, bound.Addr().(*net.TCPAddr).Port, free}
	got, r, err := reserve(func() int { p := offers[0]; offers = offers[1:]; return p })
	if err != nil {
		t.Fatal(err)
	}
	defer r()
	if got != free {
		t.Fatalf("reserve returned %d; want %d, after skipping held %d and bound %d", got, free, held, bound.Addr().(*net.TCPAddr).Port)
	}
}
