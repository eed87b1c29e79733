package route

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
)

// Static returns a Resolve function for a fixed list of addresses.
func Static(addrs []string) func(context.Context) ([]string, error) {
	addrs = slices.Clone(addrs)
	return func(context.Context) ([]string, error) { return addrs, nil }
}

// DNS returns a Resolve function that looks host up and pairs every
// address it has (A and AAAA records) with port: a compose service name
// resolves to one address per replica. lookup is net.DefaultResolver's
// LookupHost when nil.
func DNS(host, port string, lookup func(ctx context.Context, host string) ([]string, error)) func(context.Context) ([]string, error) {
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	return func(ctx context.Context) ([]string, error) {
		ips, err := lookup(ctx, host)
		if err != nil {
			return nil, err
		}
		out := make([]string, 0, len(ips))
		for _, ip := range ips {
			out = append(out, net.JoinHostPort(ip, port))
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	}
}

// IsMulti reports whether a --sandbox value names several replicas: a comma
// list or a dns:/// name.
func IsMulti(spec string) bool {
	return strings.Contains(spec, ",") || strings.HasPrefix(spec, "dns:")
}

// Parse turns a --sandbox value into a Resolve function: "dns:///name:port"
// (re-resolved every refresh) or "host:port,host:port".
func Parse(spec string) (func(context.Context) ([]string, error), error) {
	if rest, ok := strings.CutPrefix(spec, "dns:"); ok {
		rest = strings.TrimPrefix(rest, "///")
		host, port, err := net.SplitHostPort(rest)
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("sandbox address %q: want dns:///name:port, e.g. dns:///sandboxd:9002", spec)
		}
		return DNS(host, port, nil), nil
	}
	var addrs []string
	for _, a := range strings.Split(spec, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("sandbox address %q in %q: want host:port[,host:port…] or dns:///name:port", a, spec)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("sandbox address %q names no replica", spec)
	}
	return Static(addrs), nil
}
