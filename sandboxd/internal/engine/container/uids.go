package container

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Host uids of container sandboxes. Rootful docker and podman run
// containers in the host's user namespace, so the kernel counts against
// each container's host uid what its processes make: queued signals
// (RLIMIT_SIGPENDING), processes (RLIMIT_NPROC), locked memory, epoll
// watches, pipe buffers, inotify and fanotify. Each sandbox therefore runs
// as a uid of its own, from a range nothing else on the host uses, given
// back once its container is gone.
const (
	// DefaultFirstUID is the default range's first uid, 2,000,000,000: in
	// the span systemd's uid registry leaves unused (1879048192 to
	// 2147352575), above the subordinate ranges useradd hands out (100000
	// to 600100000 by default) and systemd-nspawn's container ranges
	// (524288 to 1879048191), below podman's "containers" range
	// (2147483647 up) and below 2^31, which some tools read as negative.
	DefaultFirstUID = 2_000_000_000
	// DefaultUIDCount is the default range's size: that many sandboxes at
	// once.
	DefaultUIDCount = 65536
	// LabelUID is the host uid of a container that has one of its own, so
	// that no sandboxd (this one after a restart, or a replica on the same
	// engine) hands it out again while the container exists.
	LabelUID = "codeexec.uid"

	minFirstUID = 65536     // above the 16-bit uids distributions allocate
	maxLastUID  = 1<<31 - 2 // below 2^31-1 and the uids read as negative
)

// ParseUIDRange reads FIRST-LAST, the host uids container sandboxes take
// one each of (--container-uids), and returns the first and the count.
func ParseUIDRange(s string) (first, count int, err error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	f, ferr := strconv.Atoi(strings.TrimSpace(a))
	l, lerr := strconv.Atoi(strings.TrimSpace(b))
	if !ok || ferr != nil || lerr != nil {
		return 0, 0, fmt.Errorf("container uid range %q is not FIRST-LAST: set CODEEXEC_CONTAINER_UIDS (--container-uids) to two uids, e.g. %d-%d", s, DefaultFirstUID, DefaultFirstUID+DefaultUIDCount-1)
	}
	if err := checkUIDRange(f, l-f+1); err != nil {
		return 0, 0, err
	}
	return f, l - f + 1, nil
}

// checkUIDRange refuses a range that is empty, within the 16-bit uids, or
// reaches 2^31-1.
func checkUIDRange(first, count int) error {
	if count < 1 || first < minFirstUID || first+count-1 > maxLastUID {
		return fmt.Errorf("container uid range %d-%d is out of bounds: set CODEEXEC_CONTAINER_UIDS (--container-uids) to FIRST-LAST with %d <= FIRST <= LAST <= %d, a range nothing else on the host uses, e.g. %d-%d",
			first, first+count-1, minFirstUID, maxLastUID, DefaultFirstUID, DefaultFirstUID+DefaultUIDCount-1)
	}
	return nil
}

// idFiles are the files checkHostUIDs reads.
type idFiles struct{ passwd, group, subuid, subgid string }

// hostIDFiles are this host's.
var hostIDFiles = idFiles{"/etc/passwd", "/etc/group", "/etc/subuid", "/etc/subgid"}

// checkHostUIDs refuses a range that holds an account or group of this
// host, or overlaps a subordinate range (/etc/subuid, /etc/subgid) that
// user namespaces map: their processes would share the sandboxes' counts.
// Files that do not exist hold nothing.
func checkHostUIDs(first, count int, hostFiles idFiles) error {
	in := func(id int) bool { return id >= first && id < first+count }
	for _, f := range []struct {
		path  string
		field int
	}{{hostFiles.passwd, 2}, {hostFiles.group, 2}} {
		if name, id, ok := findLine(f.path, func(p []string) (int, bool) {
			id, err := strconv.Atoi(at(p, f.field))
			return id, err == nil && in(id)
		}); ok {
			return fmt.Errorf("container uid range %d-%d holds %s's entry %q (id %d): set CODEEXEC_CONTAINER_UIDS (--container-uids) to a range nothing on the host uses",
				first, first+count-1, f.path, name, id)
		}
	}
	for _, path := range []string{hostFiles.subuid, hostFiles.subgid} {
		if name, start, ok := findLine(path, func(p []string) (int, bool) {
			s, err1 := strconv.Atoi(at(p, 1))
			n, err2 := strconv.Atoi(at(p, 2))
			return s, err1 == nil && err2 == nil && s < first+count && first < s+n
		}); ok {
			return fmt.Errorf("container uid range %d-%d overlaps %s's range of %q from %d, which user namespaces map: set CODEEXEC_CONTAINER_UIDS (--container-uids) to a range outside it",
				first, first+count-1, path, name, start)
		}
	}
	return nil
}

// findLine returns the first colon-separated line of path that match
// accepts: its first field and match's number.
func findLine(path string, match func([]string) (int, bool)) (string, int, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), ":")
		if n, ok := match(p); ok {
			return p[0], n, true
		}
	}
	return "", 0, false
}

func at(p []string, i int) string {
	if i < len(p) {
		return strings.TrimSpace(p[i])
	}
	return ""
}

// uidPool hands out the range's uids, one per sandbox ID. Safe for
// concurrent use.
type uidPool struct {
	first, count int

	mu   sync.Mutex
	byID map[string]int // this engine's sandboxes
	mine map[int]bool   // byID's uids
	// seen are the uids on containers the last listing found (any
	// owner's) and of containers this engine could not remove: in use
	// until a later listing no longer finds them.
	seen map[int]bool
}

func newUIDPool(first, count int) *uidPool {
	return &uidPool{first: first, count: count, byID: map[string]int{}, mine: map[int]bool{}, seen: map[int]bool{}}
}

// errNoUID is take's error when every uid is in use.
var errNoUID = errors.New("every host uid of the container range is in use")

// take gives sandbox id a uid that no sandbox of this engine holds, no
// listed container has and no process in busy runs as. It starts at a
// random place, so that two sandboxd processes sharing an engine (which
// learn of each other's containers only at their next listing) rarely
// pick the same one meanwhile.
func (p *uidPool) take(id string, busy map[int]bool) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if uid, ok := p.byID[id]; ok {
		return uid, nil
	}
	start := rand.IntN(p.count)
	for i := range p.count {
		uid := p.first + (start+i)%p.count
		if !p.mine[uid] && !p.seen[uid] && !busy[uid] {
			p.byID[id], p.mine[uid] = uid, true
			return uid, nil
		}
	}
	return 0, fmt.Errorf("%w (%d-%d): widen CODEEXEC_CONTAINER_UIDS (--container-uids)", errNoUID, p.first, p.first+p.count-1)
}

// give returns id's uid; kept, it stays taken until a listing no longer
// finds its container (one that could not be removed).
func (p *uidPool) give(id string, kept bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	uid, ok := p.byID[id]
	if !ok {
		return
	}
	delete(p.byID, id)
	delete(p.mine, uid)
	if kept {
		p.seen[uid] = true
	}
}

// listed replaces the uids found on containers.
func (p *uidPool) listed(uids map[int]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = uids
}

// procUIDs returns the uids in [first, first+count) that a process this
// process can see runs as (real, effective, saved or file-system uid):
// a container of another sandboxd, started since the last listing, has
// one. A hidden PID namespace shows none; the listing still covers it.
func procUIDs(first, count int) map[int]bool {
	busy := map[int]bool{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return busy
	}
	for _, e := range ents {
		if e.Name()[0] < '1' || e.Name()[0] > '9' {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		_, rest, ok := strings.Cut(string(status), "\nUid:")
		if !ok {
			continue
		}
		line, _, _ := strings.Cut(rest, "\n")
		for _, f := range strings.Fields(line) {
			if uid, err := strconv.Atoi(f); err == nil && uid >= first && uid < first+count {
				busy[uid] = true
			}
		}
	}
	return busy
}

// userFiles are the /etc/passwd and /etc/group a sandbox of uid sees: root,
// nobody and the sandbox user, "sandbox", at home in /workspace, so that
// lookups of the own uid (getpass.getuser, git, ssh) work as under bwrap.
func userFiles(uid int) (passwd, group string) {
	u := strconv.Itoa(uid)
	passwd = "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
		"sandbox:x:" + u + ":" + u + ":sandbox:/workspace:/usr/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group = "root:x:0:\nsandbox:x:" + u + ":\nnogroup:x:65534:\n"
	return passwd, group
}
