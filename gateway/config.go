package gateway

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/gateway/internal/guard"
	"github.com/codeexec/codeexec/gateway/internal/quota"
	"github.com/codeexec/codeexec/gateway/internal/reqstate"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
)

// HTTPAuth configures who may use the HTTP transport: bearer tokens from a
// file, JWTs from an OAuth issuer, and the Host, Origin and /metrics
// rules. See its fields.
type HTTPAuth = guard.Config

// Quotas caps what one tenant may use at once: sessions, running calls
// and calls per minute. Zero fields mean no cap.
type Quotas = quota.Limits

// QuotaError is a call refused because its tenant is over a quota.
type QuotaError = quota.Error

// MinStateKeyBytes is the shortest Config.StateKey.
const MinStateKeyBytes = reqstate.MinKeyBytes

// Config configures a Gateway. Zero values take the defaults above.
type Config struct {
	// DefaultTimeout applies when a call gives no timeout
	// (MCP_BRIDGE_TIMEOUT, default 30s).
	DefaultTimeout time.Duration
	// MaxTimeout caps the timeout a call may ask for
	// (MCP_BRIDGE_MAX_TIMEOUT, default an hour).
	MaxTimeout time.Duration
	// Yield is how long a call runs before it returns status "running",
	// its code running on (CODEEXEC_YIELD, default DefaultYield); a
	// negative value never yields.
	Yield time.Duration
	// OutputMode is "compact" (the default) or "toon". As upstream does,
	// any value other than empty or "compact" selects TOON; New warns of a
	// value other than those two.
	OutputMode string
	// OutputLimitBytes is sandboxd's per-stream output cap. The gateway
	// only quotes it in the truncation note; sandboxd does the cutting.
	// Zero means unknown.
	OutputLimitBytes int64
	// Tenant owns the sandbox sessions the gateway creates ("default").
	Tenant string
	// Version is reported as the MCP server version.
	Version string
	// SessionIdleTimeout ends HTTP sessions idle for this long, as if the
	// client had sent DELETE, so that clients that vanish do not leave
	// sandbox sessions and routing entries behind. Zero keeps them until
	// sandboxd reaps the sandbox session.
	SessionIdleTimeout time.Duration
	// Auth controls access to the HTTP transport. stdio is not affected:
	// whoever starts the process owns it.
	Auth HTTPAuth
	// Quotas cap each tenant's sessions and calls.
	Quotas Quotas
	// HTTP bounds what clients of the HTTP transport hold: bytes in
	// flight and timeouts. Zero fields take DefaultHTTPLimits.
	HTTP HTTPLimits
	// Registerer, when set, receives the gateway's metrics.
	Registerer prometheus.Registerer
	// MaxToolCalls bounds the MCP tool calls one run_python call makes
	// (--max-tool-calls); the call past it raises an error naming the
	// limit. 0 is no limit. TenantMaxToolCalls sets it per tenant.
	MaxToolCalls       int
	TenantMaxToolCalls map[string]int
	// TenantMaxTimeout lowers MaxTimeout for a tenant's calls.
	TenantMaxTimeout map[string]time.Duration
	// Tools is the tool surface offered (--tools): ToolsRunPython (the
	// default), ToolsPassthrough or ToolsBoth. An HTTP connection may ask
	// for another with ?tools= on the URL.
	Tools string
	// Discovery reaches discoveryd, for the passthrough tools; nil offers
	// run_python alone.
	Discovery discoveryv1.DiscoveryServiceClient
	// DialReplica connects to the sandbox replica at an address that a
	// SessionElsewhere answer named (a session live on another replica, or
	// in another codeexec process on this machine). The gateway keeps one
	// connection per address. Nil follows no such answer.
	DialReplica func(addr string) (*grpc.ClientConn, error)
	// StateKey signs the requestState of input_required results (see
	// reqstate), so that a client cannot make one up or take another
	// tenant's. Gateways that take each other's retries need the same
	// key; empty is a random key of this gateway's alone.
	StateKey []byte
}

func (c Config) withDefaults() Config {
	if c.DefaultTimeout == 0 {
		c.DefaultTimeout = DefaultTimeout
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	if c.Yield == 0 {
		c.Yield = DefaultYield
	}
	if c.Tenant == "" {
		c.Tenant = DefaultTenant
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	c.HTTP = c.HTTP.withDefaults()
	return c
}

// Validate reports configuration errors. A default timeout above the maximum
// is accepted and clamped per call, as upstream does.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.DefaultTimeout < time.Second {
		errs = append(errs, fmt.Errorf("default timeout (MCP_BRIDGE_TIMEOUT) is %v; it must be at least 1s", c.DefaultTimeout))
	}
	if c.MaxTimeout < time.Second {
		errs = append(errs, fmt.Errorf("maximum timeout (MCP_BRIDGE_MAX_TIMEOUT) is %v; it must be at least 1s", c.MaxTimeout))
	}
	if _, err := parseSurface(c.Tools); err != nil {
		errs = append(errs, err)
	}
	if c.MaxToolCalls < 0 {
		errs = append(errs, fmt.Errorf("max tool calls is %d; it must be zero (no limit) or positive", c.MaxToolCalls))
	}
	for tenant, n := range c.TenantMaxToolCalls {
		if n < 0 {
			errs = append(errs, fmt.Errorf("max tool calls of tenant %q is %d; it must be zero (no limit) or positive", tenant, n))
		}
	}
	for tenant, d := range c.TenantMaxTimeout {
		if d < time.Second {
			errs = append(errs, fmt.Errorf("maximum timeout of tenant %q is %v; it must be at least 1s", tenant, d))
		}
	}
	if n := len(c.StateKey); n > 0 && n < reqstate.MinKeyBytes {
		errs = append(errs, fmt.Errorf("the request state key is %d bytes; it must be at least %d (or none, for a random one)", n, reqstate.MinKeyBytes))
	}
	if c.Yield > 0 && c.Yield < time.Second {
		errs = append(errs, fmt.Errorf("yield time (CODEEXEC_YIELD) is %v; it must be at least 1s, or 0 never to yield", c.Yield))
	}
	errs = append(errs, c.Quotas.Validate(), c.Auth.Validate(), c.HTTP.Validate())
	if c.OutputLimitBytes < 0 {
		errs = append(errs, fmt.Errorf("output limit is %d bytes; it must be zero (unknown) or positive", c.OutputLimitBytes))
	}
	return errors.Join(errs...)
}

// maxToolCalls is the tool-call limit of one run of tenant's.
func (c Config) maxToolCalls(tenant string) int {
	if n, ok := c.TenantMaxToolCalls[tenant]; ok {
		return n
	}
	return c.MaxToolCalls
}

// seconds converts d to whole seconds, rounding up.
func seconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}
