package sandboxd

import (
	"math"
	"strings"
	"testing"
)

func TestShareOut(t *testing.T) {
	t.Parallel()
	host := hostLimits{fileMax: 2_466_246, filesInUse: 2_000, sigPending: 96_367, memLock: 8 << 20}
	for _, tc := range []struct {
		name      string
		lim       Limits
		n         int
		host      hostLimits
		wantFiles int
		wantSigs  int64
		wantLock  int64
		wantErr   string
	}{
		{name: "no session cap: the defaults", lim: Limits{Pids: 128}, n: 0, host: host,
			wantFiles: DefaultOpenFiles, wantSigs: defaultPendingSignals, wantLock: defaultLockedBytes},
		{name: "a few sandboxes fit the defaults", lim: Limits{Pids: 128}, n: 4, host: host,
			wantFiles: DefaultOpenFiles, wantSigs: defaultPendingSignals, wantLock: defaultLockedBytes},
		{name: "the default descriptor cap shrinks to fit", lim: Limits{Pids: 128}, n: 66, host: host,
			wantFiles: 262, wantSigs: min(96_367/66, defaultPendingSignals), wantLock: defaultLockedBytes},
		{name: "signals and locked memory shared out", lim: Limits{Pids: 128}, n: 200, host: host,
			wantFiles: 86, wantSigs: 96_367 / 200, wantLock: (8 << 20) / 200},
		{name: "an explicit cap that fits stays", lim: Limits{Pids: 128, OpenFiles: 100}, n: 66, host: host,
			wantFiles: 100, wantSigs: min(96_367/66, defaultPendingSignals), wantLock: defaultLockedBytes},
		{name: "an explicit cap that does not fit", lim: Limits{Pids: 128, OpenFiles: 1024}, n: 66, host: host,
			wantErr: "lower CODEEXEC_OPEN_FILES (--open-files) to at most 262"},
		{name: "too small a table for even the floor", lim: Limits{Pids: 128}, n: 66, host: hostLimits{fileMax: 100_000, sigPending: 96_367, memLock: 8 << 20},
			wantErr: "lower MCP_BRIDGE_PIDS (--pids) or CODEEXEC_MAX_SESSIONS (--max-sessions)"},
		{name: "systemd's endless table", lim: Limits{Pids: 128}, n: 66, host: hostLimits{fileMax: math.MaxInt64, sigPending: 96_367, memLock: 8 << 20},
			wantFiles: DefaultOpenFiles, wantSigs: min(96_367/66, defaultPendingSignals), wantLock: defaultLockedBytes},
		{name: "no pids cap, no bound to check", lim: Limits{}, n: 66, host: host,
			wantFiles: DefaultOpenFiles, wantSigs: min(96_367/66, defaultPendingSignals), wantLock: defaultLockedBytes},
		{name: "unlimited signals and locked memory", lim: Limits{Pids: 128}, n: 4, host: hostLimits{fileMax: 2_466_246, sigPending: math.MaxUint64, memLock: math.MaxUint64},
			wantFiles: DefaultOpenFiles, wantSigs: defaultPendingSignals, wantLock: defaultLockedBytes},
		{name: "too few signals to share", lim: Limits{Pids: 128}, n: 66, host: hostLimits{sigPending: 1000, memLock: 8 << 20},
			wantErr: "ulimit -i"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := shareOut(tc.lim, tc.n, tc.host)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("shareOut = %+v, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.OpenFiles != tc.wantFiles || got.PendingSignals != tc.wantSigs || got.LockedBytes != tc.wantLock {
				t.Errorf("shareOut = files %d, signals %d, locked %d; want %d, %d, %d",
					got.OpenFiles, got.PendingSignals, got.LockedBytes, tc.wantFiles, tc.wantSigs, tc.wantLock)
			}
		})
	}
}

func TestMappedFilesWarning(t *testing.T) {
	t.Parallel()
	lim := Limits{MemoryBytes: 512 << 20, Pids: 128, OpenFiles: 262}
	host := hostLimits{fileMax: 2_466_246, filesInUse: 2_000}
	if w := mappedFilesWarning(lim, 65, host); !strings.Contains(w, "raise fs.file-max") {
		t.Errorf("65 sandboxes of 512 MiB on a table of 2.5 million: %q, want advice to raise fs.file-max", w)
	}
	if w := mappedFilesWarning(lim, 1, host); w != "" {
		t.Errorf("1 sandbox: %q, want no warning", w)
	}
	if w := mappedFilesWarning(lim, 65, hostLimits{fileMax: math.MaxInt64}); w != "" {
		t.Errorf("an endless table: %q, want no warning", w)
	}
}
