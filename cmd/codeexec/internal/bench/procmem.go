package bench

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// sandboxMemory sums the PSS of every process below this one and divides
// it by the number of sandbox agents among them.
func sandboxMemory() (perSandbox float64, sandboxes int) {
	total, sandboxes := treeMemory()
	if sandboxes == 0 {
		return 0, 0
	}
	return float64(total) / float64(sandboxes), sandboxes
}

// treeMemory sums the PSS of every process below this one, in bytes, and
// counts the sandbox agents among them.
func treeMemory() (total int64, sandboxes int) {
	parent := procParents()
	self := os.Getpid()
	below := func(pid int) bool {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == self {
				return true
			}
		}
		return false
	}
	for pid := range parent {
		if !below(pid) {
			continue
		}
		total += pss(pid)
		// The agent is the python3 process running agent.py; bwrap's own
		// command line names both too, so look at argv[0] only. A sandbox
		// from the fork server has the server's command line, and only
		// its agent is named python3 (the server and the sandbox's other
		// processes are codeexec-*).
		cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		argv0, _, _ := bytes.Cut(cmd, []byte{0})
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if strings.HasPrefix(filepath.Base(string(argv0)), "python") &&
			(bytes.Contains(cmd, []byte("agent.py")) || bytes.Contains(cmd, []byte("codeexec_forkserver.py")) && strings.HasPrefix(string(comm), "python")) {
			sandboxes++
		}
	}
	return total, sandboxes
}

// pss reads a process's proportional set size in bytes.
func pss(pid int) int64 {
	return procField(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"), "Pss:")
}

// selfMemory returns this process's RSS and peak RSS in bytes.
func selfMemory() (rss, peak int64) {
	return procField("/proc/self/status", "VmRSS:"), procField("/proc/self/status", "VmHWM:")
}

func procField(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func numCPU() int { return runtime.NumCPU() }

// hostDescription names the CPU and kernel, for the record.
func hostDescription() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return model + ", Linux " + strings.TrimSpace(string(kernel))
}

// procParents maps every PID to its parent.
func procParents() map[int]int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 2 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	return parent
}

// kindMemory is what the processes below this one of one kind (their
// name: the fork server's codeexec-zygote, a sandbox's monitor
// codeexec-sbx, its init codeexec-init, its agent python3) hold.
type kindMemory struct {
	n                 int
	pss, privateDirty int64
}

// memoryByKind breaks treeMemory down by process name.
func memoryByKind() map[string]kindMemory {
	parent := procParents()
	self := os.Getpid()
	out := map[string]kindMemory{}
	for pid := range parent {
		below := false
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == self {
				below = true
				break
			}
		}
		if !below {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		k := out[strings.TrimSpace(string(comm))]
		rollup := filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup")
		k.n++
		k.pss += procField(rollup, "Pss:")
		k.privateDirty += procField(rollup, "Private_Dirty:")
		out[strings.TrimSpace(string(comm))] = k
	}
	return out
}
