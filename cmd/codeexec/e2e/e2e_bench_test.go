package e2e

import (
	"bytes"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// `codeexec bench` with the smallest counts prints every row of the table
// docs/PERFORMANCE.md is made from, each with a time, against real
// sandboxes and real `codeexec serve` processes. It asserts no figure:
// timings belong in docs/PERFORMANCE.md, never in a test.
func TestE2EBenchPrintsEveryRow(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(harness.Binary, "bench", "--warm", "3", "--fresh", "1", "--sessions", "1", "--execs", "1",
		"--idle-sessions", "2", "--burst", "2", "--spawns", "2", "--first-sessions", "1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("codeexec bench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	// A row: | name | p50 | p99 | ratio× | notes
	rowRE := regexp.MustCompile(`^\| (.+?) +\| +([0-9.]+) ms \| +([0-9.]+) ms \| +[0-9.]+× \|`)
	rows := map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		if m := rowRE.FindStringSubmatch(line); m != nil {
			p50, _ := strconv.ParseFloat(m[2], 64)
			rows[strings.TrimSpace(m[1])] = p50
		}
	}
	for _, want := range []string{
		"baseline: bare `python3 -c pass` spawn",
		`warm run_python("pass") via MCP stdio`,
		"… with bwrap itself (--fork-server=false)",
		"new `codeexec serve`, 2 s on: first result",
		"… then its second result",
		"new session → first result, no warm pool",
		"… and no launch spares either",
		"new session → first result, warm pool of 4",
		"2 new sessions at once, no pool",
		"… bwrap (--fork-server=false)",
		"1 sessions × 1 execs, concurrent: latency",
	} {
		p50, ok := rows[want]
		if !ok {
			t.Errorf("no row %q in the table:\n%s", want, out)
			continue
		}
		if p50 <= 0 {
			t.Errorf("row %q has a p50 of %v ms; a measured time is more than zero", want, p50)
		}
	}
	for _, want := range []string{
		"taking turns with the row below",
		"0 errors, 0 lost outputs",
		"memory of a new `codeexec serve` at rest",
		"memory under load:",
		"memory per idle session, fork server true : ",
		"memory per idle session, fork server false: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "n/a") {
		t.Errorf("a figure is missing (n/a) with --idle-sessions 2:\n%s", out)
	}

	// A bad flag is refused before anything runs, saying what is accepted.
	bad := exec.Command(harness.Binary, "bench", "--fresh-gap", "1ms")
	msg, err := bad.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "--fresh-gap 1ms is too short: give at least 10ms") {
		t.Errorf("bench --fresh-gap 1ms: err %v, output %q; want a refusal that names the least gap", err, msg)
	}
}
