package container

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Many sandboxes claiming at once each get a uid of their own, the range's
// end is an error naming it, and a uid comes back only once given back
// (or, for a container that could not be removed, once no listing finds
// it any more).
func TestUIDPoolHandsOutEachUIDOnce(t *testing.T) {
	t.Parallel()
	const first, count = 3_000_000, 64
	p := newUIDPool(first, count)
	var wg sync.WaitGroup
	got := make([]int, count)
	errs := make([]error, count)
	for i := range count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = p.take(fmt.Sprint("s", i), nil)
		}()
	}
	wg.Wait()
	seen := map[int]bool{}
	for i, uid := range got {
		if errs[i] != nil || uid < first || uid >= first+count || seen[uid] {
			t.Fatalf("take #%d = %d, %v: want a uid of the range no other sandbox has", i, uid, errs[i])
		}
		seen[uid] = true
	}
	if again, _ := p.take("s3", nil); again != got[3] {
		t.Errorf("a second take for one sandbox gave %d, then %d", got[3], again)
	}
	_, err := p.take("one-too-many", nil)
	if !errors.Is(err, errNoUID) || !strings.Contains(err.Error(), "3000000-3000063") || !strings.Contains(err.Error(), "--container-uids") {
		t.Fatalf("take past the range: %v", err)
	}
	p.give("s5", false)
	if uid, err := p.take("next", nil); err != nil || uid != got[5] {
		t.Errorf("after s5 gave %d back, take = %d, %v", got[5], uid, err)
	}
	p.give("s6", true) // its container could not be removed
	if _, err := p.take("after-kept", nil); !errors.Is(err, errNoUID) {
		t.Errorf("a kept uid was handed out again before a listing let it go: %v", err)
	}
	p.listed(map[int]bool{})
	if uid, err := p.take("after-listing", nil); err != nil || uid != got[6] {
		t.Errorf("after a listing without its container, take = %d, %v; want %d", uid, err, got[6])
	}
}

// A uid on a listed container, or one that a host process runs as, is
// never handed out.
func TestUIDPoolSkipsListedAndBusyUIDs(t *testing.T) {
	t.Parallel()
	p := newUIDPool(4_000_000, 3)
	p.listed(map[int]bool{4_000_000: true})
	for i := range 10 {
		uid, err := p.take(fmt.Sprint("s", i), map[int]bool{4_000_001: true})
		if err != nil || uid != 4_000_002 {
			t.Fatalf("take = %d, %v; want the one free uid, 4000002", uid, err)
		}
		p.give(fmt.Sprint("s", i), false)
	}
}

// procUIDs finds a host process that runs as a uid of the range, as a
// container of another sandboxd's would.
func TestProcUIDsSeesAHostProcessOfTheRange(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to start a process as another uid")
	}
	const first = 5_000_000
	cmd := exec.Command("/bin/sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: first + 7, Gid: first + 7, Groups: []uint32{}}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if busy := procUIDs(first, 100); !busy[first+7] || len(busy) != 1 {
		t.Errorf("procUIDs = %v, want only %d", busy, first+7)
	}
	if busy := procUIDs(first+8, 100); len(busy) != 0 {
		t.Errorf("procUIDs above the process's uid = %v, want none", busy)
	}
}

func TestParseUIDRange(t *testing.T) {
	t.Parallel()
	if f, n, err := ParseUIDRange(" 2000000000-2000065535 "); err != nil || f != DefaultFirstUID || n != DefaultUIDCount {
		t.Errorf("the default range: %d %d %v", f, n, err)
	}
	for _, bad := range []string{"", "2000000000", "2000000000-", "a-b", "100-200", "2000000010-2000000000", "2147483000-2147483647", "-5-10"} {
		_, _, err := ParseUIDRange(bad)
		if err == nil || !strings.Contains(err.Error(), "CODEEXEC_CONTAINER_UIDS (--container-uids)") || !strings.Contains(err.Error(), "2000000000-2000065535") {
			t.Errorf("ParseUIDRange(%q) = %v; want an error saying what to set", bad, err)
		}
	}
}

func TestCheckHostUIDsRefusesAccountsAndSubordinateRanges(t *testing.T) {
	t.Parallel()
	if err := checkHostUIDs(DefaultFirstUID, DefaultUIDCount, hostIDFiles); err != nil {
		t.Fatalf("the default range on this host: %v", err)
	}
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var hostFiles idFiles
	hostFiles.passwd = write("passwd", "root:x:0:0::/root:/bin/sh\nbig:x:2000000100:100::/:/bin/sh\n")
	hostFiles.group = write("group", "root:x:0:\n")
	hostFiles.subuid = write("subuid", "alice:100000:65536\ncontainers:2147483647:2147483648\n")
	hostFiles.subgid = write("subgid", "bob:1999999000:2001\n")
	for _, tc := range []struct {
		first, count int
		want         string
	}{
		{2_000_000_000, 65536, `"big" (id 2000000100)`},
		{2_000_001_000, 65536, `subgid's range of "bob" from 1999999000`},
		{150_000, 10, `subuid's range of "alice" from 100000`},
		{2_147_483_000, 1000, `"containers" from 2147483647`},
	} {
		err := checkHostUIDs(tc.first, tc.count, hostFiles)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--container-uids") {
			t.Errorf("range %d+%d: %v, want an error naming %s", tc.first, tc.count, err, tc.want)
		}
	}
	if err := checkHostUIDs(2_001_000_000, 65536, hostFiles); err != nil {
		t.Errorf("a free range: %v", err)
	}
}

func TestCheckUser(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "65534:65534", "1000", "nobody", "nobody:nogroup", "app_user:1000"} {
		if err := CheckUser(ok); err != nil {
			t.Errorf("CheckUser(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"0", "0:0", "root", "root:root", "a b", "1000:", ":1000", "65534:65534:1", "$(id)"} {
		err := CheckUser(bad)
		if err == nil || !strings.Contains(err.Error(), "MCP_BRIDGE_CONTAINER_USER (--container-user)") {
			t.Errorf("CheckUser(%q) = %v, want an error saying what to set", bad, err)
		}
	}
}

// reapOrphans tells the pool the uids of the containers that stay (a live
// owner's elsewhere), not those of the orphans it removed, unless their
// removal failed.
func TestReapOrphansKeepsTheUIDsOfContainersThatStay(t *testing.T) {
	t.Parallel()
	for _, rmFails := range []bool{false, true} {
		t.Run("rm fails "+strconv.FormatBool(rmFails), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cli := filepath.Join(dir, "docker")
			rm := "exit 0"
			if rmFails {
				rm = "echo 'Error: device busy' >&2; exit 1"
			}
			recent := time.Now().UTC().Format(time.RFC3339Nano)
			script := `#!/bin/sh
case "$1" in
ps) echo a; echo b ;;
inspect)
  echo "/codeexec-live|otherhost/1/abcd|||running|0001-01-01T00:00:00Z|` + recent + `|2000000001"
  echo "/codeexec-orphan|otherhost/1/abcd|||exited|2000-01-01T00:00:00Z|2000-01-01T00:00:00Z|2000000002" ;;
rm) ` + rm + ` ;;
esac
`
			if err := os.WriteFile(cli, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			c, err := New(Config{Runtime: "docker", Image: "img", FilesDir: dir}, slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			c.bin, c.workDir = cli, dir
			c.reapOrphans(t.Context(), false)
			c.uids.mu.Lock()
			seen := fmt.Sprint(c.uids.seen)
			c.uids.mu.Unlock()
			want := "map[2000000001:true]"
			if rmFails {
				want = "map[2000000001:true 2000000002:true]"
			}
			if seen != want {
				t.Errorf("uids taken after reaping: %s, want %s", seen, want)
			}
		})
	}
}
