package guard

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// checkOrigin returns why a request's Host or Origin is refused, or "".
func (g *Guard) checkOrigin(r *http.Request) string {
	c := g.opts.Config
	resHost := ""
	if u, err := url.Parse(c.ResourceURL); err == nil && c.ResourceURL != "" {
		resHost = u.Host
	}
	hostOK := loopbackName(r.Host) || strings.EqualFold(r.Host, resHost) ||
		listed(c.AllowedHosts, r.Host) || listed(c.AllowedHosts, hostOnly(r.Host)) ||
		(g.authn != nil && len(c.AllowedHosts) == 0)
	if !hostOK {
		return fmt.Sprintf("Host %q is not allowed: the accepted ones are localhost, the loopback addresses, the host of --resource-url "+
			"and those listed in --allowed-hosts (CODEEXEC_ALLOWED_HOSTS); add %q there to accept it", r.Host, hostOnly(r.Host))
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err == nil && u.Host != "" && (loopbackName(u.Host) || strings.EqualFold(u.Host, resHost)) {
		return ""
	}
	if listed(c.AllowedOrigins, strings.TrimSuffix(origin, "/")) {
		return ""
	}
	return fmt.Sprintf("Origin %q is not allowed: the accepted ones are the origins on localhost or a loopback address, that of --resource-url "+
		"and those listed in --allowed-origins (CODEEXEC_ALLOWED_ORIGINS); add %q there to accept it", origin, strings.TrimSuffix(origin, "/"))
}

// loopbackName reports whether host[:port] names this machine: localhost
// or a loopback IP.
func loopbackName(hostport string) bool {
	h := strings.Trim(hostOnly(hostport), "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// hostOnly drops the port of host:port, so that a listed name matches on
// any port.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// listed reports whether v, or "*", is in list, ignoring case.
func listed(list []string, v string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return s == "*" || strings.EqualFold(s, v) })
}
