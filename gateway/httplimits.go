package gateway

import (
	"fmt"
	"net/http"
	"time"

	"github.com/codeexec/codeexec/gateway/internal/bodylimit"
	"github.com/codeexec/codeexec/gateway/internal/params"
)

// MaxBodyBytes bounds the body of a request to the HTTP transport; a larger
// one gets 413. The largest legitimate request is a run_python call with
// params.MaxCodeBytes of code, and 1 MiB is left for the rest of it: code
// whose JSON escapes (a newline is 2 bytes, a non-ASCII character a client
// escapes as \uXXXX 6) take it past that is refused, saying so, as is
// code past its own cap.
const MaxBodyBytes = params.MaxCodeBytes + 1<<20

// maxOutsideCode bounds the bytes of a body outside its longest string
// (the code): arguments and framing are short, and it is numbers, arrays
// and objects that take many times their size once parsed.
const maxOutsideCode = 1 << 20

// HTTPLimits bound what clients of the HTTP transport hold of the gateway:
// request bytes in flight, per tenant and in all (each body is within
// MaxBodyBytes, and counted from its first byte until it is answered),
// and how long a body, an idle connection and a stalled write may take.
type HTTPLimits struct {
	// MaxInFlight caps the request bytes in flight in all, TenantInFlight
	// those of one tenant. Zero takes the default; each must hold one
	// body of MaxBodyBytes.
	MaxInFlight, TenantInFlight int64
	// BodyTimeout bounds the read of one body, IdleTimeout an idle
	// keep-alive connection, and WriteTimeout one write of an answer (an
	// event stream may last; each write on it may not stall longer).
	BodyTimeout, IdleTimeout, WriteTimeout time.Duration
}

// DefaultHTTPLimits are the bounds of the HTTP transport unless set: one
// body of the largest size in flight per tenant, with 1 MiB beside it for
// its ordinary calls, and two in all, with 4 MiB. A call with 60 MiB of
// code raised a serve process's peak memory by 706 MiB as it passed
// through the gateway, sandboxd and the sandbox's channel (docs/HTTP.md).
var DefaultHTTPLimits = HTTPLimits{
	MaxInFlight: 2*MaxBodyBytes + 4<<20, TenantInFlight: MaxBodyBytes + 1<<20,
	BodyTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute, WriteTimeout: time.Minute,
}

func (l HTTPLimits) withDefaults() HTTPLimits {
	d := DefaultHTTPLimits
	if l.MaxInFlight == 0 {
		l.MaxInFlight = d.MaxInFlight
	}
	if l.TenantInFlight == 0 {
		l.TenantInFlight = d.TenantInFlight
	}
	if l.BodyTimeout == 0 {
		l.BodyTimeout = d.BodyTimeout
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.WriteTimeout == 0 {
		l.WriteTimeout = d.WriteTimeout
	}
	return l
}

// Validate reports a bound that no request could pass, or a negative one.
func (l HTTPLimits) Validate() error {
	l = l.withDefaults()
	switch {
	case l.TenantInFlight < MaxBodyBytes || l.MaxInFlight < l.TenantInFlight:
		return fmt.Errorf("HTTP bytes in flight: a tenant's (--http-tenant-inflight, %d) must hold one body of %d bytes (64 MiB), and the total (--http-max-inflight, %d) a tenant's",
			l.TenantInFlight, MaxBodyBytes, l.MaxInFlight)
	case l.BodyTimeout < 0 || l.IdleTimeout < 0 || l.WriteTimeout < 0:
		return fmt.Errorf("HTTP timeouts %s, %s, %s: each must be positive, or 0 for the default", l.BodyTimeout, l.IdleTimeout, l.WriteTimeout)
	}
	return nil
}

// bodyLimits are the body limiter's bounds.
func (l HTTPLimits) bodyLimits() bodylimit.Limits {
	return bodylimit.Limits{Request: MaxBodyBytes, Outside: maxOutsideCode, Tenant: l.TenantInFlight, Total: l.MaxInFlight, ReadTimeout: l.BodyTimeout}
}

// writeDeadline gives each write of an answer d to complete: a client
// that stops reading holds its connection (and what is queued for it) no
// longer. A deadline set per write lets event streams last.
type writeDeadline struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func withWriteDeadline(w http.ResponseWriter, d time.Duration) *writeDeadline {
	return &writeDeadline{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
}

func (w *writeDeadline) Write(b []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(b)
}

// Flush keeps http.Flusher, which mcp-go's event streams need.
func (w *writeDeadline) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *writeDeadline) Unwrap() http.ResponseWriter { return w.ResponseWriter }
