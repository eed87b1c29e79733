//go:build race

package search

// raceEnabled reports that the race detector is on, which makes timings
// meaningless and slow to collect.
const raceEnabled = true
