// Package tick runs the background work every service has on a ticker:
// sweeps, heartbeats, refreshes and reaping.
package tick

import "time"

// Every calls fn every d until stop is closed (pass ctx.Done() to stop with
// a context). fn runs on the caller's goroutine, so one call ends before
// the next begins; ticks that fall due meanwhile are dropped, as a
// time.Ticker drops them.
func Every(stop <-chan struct{}, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		fn()
	}
}
