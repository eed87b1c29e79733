package e2e

// The figures of long runs for docs/PERFORMANCE.md (issue 39), printed,
// never asserted: CODEEXEC_LONGRUN_FIGURES=1 go test -run
// TestLongRunFigures -v ./cmd/codeexec/e2e/

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

func TestLongRunFigures(t *testing.T) {
	if os.Getenv("CODEEXEC_LONGRUN_FIGURES") == "" {
		t.Skip("prints the figures of docs/PERFORMANCE.md; set CODEEXEC_LONGRUN_FIGURES=1")
	}
	const n = 20
	endToResult := func(yield string, sleep float64, resume bool) []time.Duration {
		c, _ := harness.StartStdio(t, map[string]string{"CODEEXEC_YIELD": yield})
		harness.Code(t, c, "import time")
		var lat []time.Duration
		for range n {
			o := harness.RunPython(t, c, map[string]any{"code": fmt.Sprintf("time.sleep(%g)\nprint(repr(time.time()))", sleep)})
			if resume {
				if o.Str("status") != "running" {
					t.Fatalf("did not yield: %s", o.Text)
				}
				o = harness.RunPython(t, c, map[string]any{"code": ""})
			}
			got := time.Now()
			end, err := strconv.ParseFloat(harness.Joined(o.Stdout()), 64)
			if err != nil {
				t.Fatalf("%s", o.Text)
			}
			lat = append(lat, got.Sub(time.Unix(0, int64(end*1e9))))
		}
		return lat
	}
	rows := []struct {
		name string
		lat  []time.Duration
	}{
		{"baseline: no yield (--yield 0), code ends at 1.5 s", endToResult("0", 1.5, false)},
		{"yield armed (45 s), not reached", endToResult("45s", 1.5, false)},
		{"yielded at 1 s, resumed by code=\"\" at once", endToResult("1s", 1.5, true)},
	}
	for _, r := range rows {
		slices.Sort(r.lat)
		t.Logf("| %s | %.1f ms | %.1f ms |", r.name, ms(r.lat[len(r.lat)/2]), ms(r.lat[len(r.lat)*9/10]))
	}

	idle, running := inFlightMemory(t, false), inFlightMemory(t, true)
	t.Logf("| 50 sessions, idle (each ran `pass`) | %.0f MiB |", idle)
	t.Logf("| 50 runs in flight (each sleeping, yielded) | %.0f MiB |", running)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// inFlightMemory starts `serve --http`, opens 50 MCP sessions, each
// running code that sleeps past the yield (running) or that ran `pass`,
// and returns the PSS of the serve process and everything under it.
func inFlightMemory(t *testing.T, running bool) float64 {
	addr := harness.FreeAddr(t)
	cmd, _ := harness.StartCommand(t, harness.BaseEnv(t, map[string]string{"CODEEXEC_YIELD": "1s", "CODEEXEC_MAX_SESSIONS": "64"}), "serve", "--http", addr)
	base := "http://" + addr
	harness.WaitHTTP(t, base+"/healthz")
	clients := make([]*client.Client, 50)
	for i := range clients {
		clients[i] = harness.HTTPClient(t, base)
		code := "pass"
		if running {
			code = "import time\ntime.sleep(600)"
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		o, err := harness.CallRunPython(ctx, clients[i], map[string]any{"code": code, "timeout": 900})
		cancel()
		if err != nil || (running && o.Str("status") != "running") {
			t.Fatalf("session %d: %v %s", i, err, o.Text)
		}
	}
	time.Sleep(2 * time.Second)
	return float64(treePSS(t, cmd.Process.Pid)) / (1 << 20)
}

// treePSS sums the proportional set size of pid and its descendants.
func treePSS(t *testing.T, pid int) int64 {
	children := map[int][]int{}
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		ppid, _ := strconv.Atoi(fields[1])
		me, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		children[ppid] = append(children[ppid], me)
	}
	var total int64
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = append(queue[1:], children[p]...)
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				total += kb << 10
			}
		}
	}
	if total == 0 {
		t.Fatal("no memory read under /proc")
	}
	return total
}
