package engine

import (
	"os"
	"path/filepath"
	"slices"
)

// hostEtc are the parts of the host's /etc that a sandbox on the host's
// /usr gets, read-only, besides the dynamic linker's cache: what Debian's
// packages in /usr rely on (the alternatives that name libblas.so.3, awk
// and which; matplotlib's matplotlibrc; Python's sitecustomize; the CA
// certificates and OpenSSL's configuration; fonts and MIME types) and
// nothing that says anything about the host's users, secrets or time
// zone: no passwd, shadow, ssl/private, hostname or localtime.
var hostEtc = []string{
	"/etc/alternatives", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/matplotlibrc",
	"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates.conf", "/etc/fonts",
	"/etc/mime.types", "/etc/protocols", "/etc/services", "/etc/python3", "/etc/python3.*",
}

// HostEtc returns the paths of hostEtc that exist here, sorted.
func HostEtc() []string {
	var out []string
	for _, p := range hostEtc {
		matches, _ := filepath.Glob(p)
		for _, m := range matches {
			if _, err := os.Stat(m); err == nil { // a dangling link binds nothing
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
