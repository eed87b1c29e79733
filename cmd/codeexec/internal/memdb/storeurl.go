package memdb

import (
	"fmt"
	"strings"

	"github.com/codeexec/codeexec/services/flagenv"
)

// bindStoreURL binds a database URL flag whose default comes from env.
// A URL given on the command line must not carry a password: every user
// of the machine sees the command line in ps.
func bindStoreURL(fs *flagenv.Set, p *string, name, usage, envName string, getenv func(string) string) {
	*p = strings.TrimSpace(getenv(envName))
	fs.Var(storeURL{p: p, name: name, fs: fs}, name, usage+" (env "+envName+")")
}

// storeURL is a flag.Value for a database URL. Set never fails, since the
// flag package would print the value, password included, in its message;
// it records the problem for flagenv.Set.Err instead.
type storeURL struct {
	p    *string
	name string
	fs   *flagenv.Set
}

func (u storeURL) String() string {
	if u.p == nil {
		return ""
	}
	return redactURL(*u.p)
}

func (u storeURL) Set(v string) error {
	*u.p = v
	if urlHasPassword(v) {
		u.fs.Fail(fmt.Errorf("--%s: the URL carries a password, which every user of this machine can read in ps; "+
			"drop it from the URL and pass it as PGPASSWORD, in a PGPASSFILE (~/.pgpass), or in a file named by --store-password-file, "+
			"or pass the whole URL as CODEEXEC_STORE", u.name))
	}
	return nil
}

// isStoreURL reports whether v is a PostgreSQL URL, not a bbolt file.
func isStoreURL(v string) bool {
	return strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://")
}

// urlHasPassword reports whether a postgres:// URL names a password, in
// its user info (user:password@) or as a password= parameter.
func urlHasPassword(v string) bool {
	rest, ok := strings.CutPrefix(v, "postgres://")
	if !ok {
		if rest, ok = strings.CutPrefix(v, "postgresql://"); !ok {
			// key=value connection strings are refused by
			// memoryd.Config.Validate; look for the key anyway.
			return strings.Contains(v, "password=")
		}
	}
	authority, query, _ := strings.Cut(rest, "?")
	authority, _, _ = strings.Cut(authority, "/")
	if at := strings.LastIndex(authority, "@"); at >= 0 && strings.Contains(authority[:at], ":") {
		return true
	}
	for _, kv := range strings.Split(query, "&") {
		if k, _, _ := strings.Cut(kv, "="); k == "password" {
			return true
		}
	}
	return false
}

// redactURL drops the password from a URL, for help text and reports.
func redactURL(v string) string {
	scheme, rest, ok := strings.Cut(v, "://")
	if !ok {
		return v
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if user, _, hasPW := strings.Cut(authority[:at], ":"); hasPW {
			authority = user + ":xxxxx" + authority[at:]
		}
	}
	if path, query, hasQuery := strings.Cut(tail, "?"); hasQuery {
		parts := strings.Split(query, "&")
		for i, kv := range parts {
			if k, _, _ := strings.Cut(kv, "="); k == "password" {
				parts[i] = "password=xxxxx"
			}
		}
		tail = path + "?" + strings.Join(parts, "&")
	}
	return scheme + "://" + authority + tail
}
