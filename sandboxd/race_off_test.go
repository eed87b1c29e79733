//go:build !race

package sandboxd_test

// raceDetector is set when the race detector is on (race_on_test.go).
const raceDetector = false
