package bodylimit

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Limits bound the request bodies the gateway holds. Zero fields set no
// bound.
type Limits struct {
	// Request caps one body. Outside caps the bytes of one body outside
	// its longest JSON string: run_python's code may be long, but a body
	// that is mostly numbers, arrays or objects costs many times its size
	// once parsed, and nothing the gateway takes needs more than a little.
	Request, Outside int64
	// Tenant and Total cap the bytes of bodies being read or served at
	// once, one tenant's and everyone's: a body counts from its first
	// byte (or, with a Content-Length, from its headers) until its
	// request has been answered.
	Tenant, Total int64
	// ReadTimeout bounds the read of one body, from its headers on: a body
	// that trickles in holds its bytes in flight and a connection.
	ReadTimeout time.Duration
}

// Reasons a body is refused, the labels of the refusals metric.
const (
	RefusedRequest = "request"
	RefusedOutside = "outside_string"
	RefusedTenant  = "tenant_in_flight"
	RefusedTotal   = "total_in_flight"
	RefusedTimeout = "read_timeout"
)

// AllRefusals lists the reasons, for metrics that show every series.
var AllRefusals = []string{RefusedRequest, RefusedOutside, RefusedTenant, RefusedTotal, RefusedTimeout}

// Budget counts the body bytes in flight, per tenant and in all, against
// Limits.Tenant and Limits.Total.
type Budget struct {
	lim Limits

	mu      sync.Mutex
	total   int64
	tenants map[string]int64
}

// NewBudget returns an empty budget for lim.
func NewBudget(lim Limits) *Budget { return &Budget{lim: lim, tenants: map[string]int64{}} }

// InFlight reports the bytes in flight now, in all.
func (b *Budget) InFlight() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// take counts n more bytes of tenant's, or refuses them if either cap
// would be passed.
func (b *Budget) take(tenant string, n int64) *refusal {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.lim.Tenant > 0 && b.tenants[tenant]+n > b.lim.Tenant:
		return &refusal{reason: RefusedTenant, status: http.StatusTooManyRequests, msg: fmt.Sprintf(
			"this tenant has %d bytes of requests in flight, and this one would take it past the %d bytes (%d MiB) it may have (--http-tenant-inflight): retry when one of its large requests has been answered",
			b.tenants[tenant], b.lim.Tenant, b.lim.Tenant>>20)}
	case b.lim.Total > 0 && b.total+n > b.lim.Total:
		return &refusal{reason: RefusedTotal, status: http.StatusServiceUnavailable, msg: fmt.Sprintf(
			"the server has %d bytes of requests in flight, and this one would take it past the %d bytes (%d MiB) it holds at once (--http-max-inflight): retry shortly",
			b.total, b.lim.Total, b.lim.Total>>20)}
	}
	b.tenants[tenant] += n
	b.total += n
	return nil
}

// give returns n bytes of tenant's.
func (b *Budget) give(tenant string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total -= n
	if b.tenants[tenant] -= n; b.tenants[tenant] <= 0 {
		delete(b.tenants, tenant)
	}
}
