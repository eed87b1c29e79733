//go:build race

package sandboxd_test

// raceDetector is set when the race detector is on: it slows sandboxd
// several times over, so TestTenThousandSessions runs a tenth of its
// sessions there, and scripts/test.sh runs it whole without the detector.
const raceDetector = true
