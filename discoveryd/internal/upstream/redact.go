package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
)

// urlInText finds the URLs in an error's text: ours ("server "x" at
// URL") and the HTTP client's (Post "URL"), which hides a password but
// not a user name or the query.
var urlInText = regexp.MustCompile(`(?i)\b(?:https?|wss?)://[^\s"'<>]+`)

// redactURLs replaces, in every URL in s, the user info and the value of
// each query parameter with "***". A remote server's config often holds
// its credentials there (https://TOKEN@host/mcp, /mcp?api_key=…), and
// errors go to the log and to the code that called the server.
func redactURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, func(raw string) string {
		// "at URL: reason" ends the URL with punctuation that is not its.
		trimmed := strings.TrimRight(raw, ":,;.)")
		return redactURL(trimmed) + raw[len(trimmed):]
	})
}

// redactURL is redactURLs for one URL. One that does not parse loses all
// but its scheme and host, as far as they can be told.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		scheme, rest, _ := strings.Cut(raw, "://")
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			rest = "***@" + rest[at+1:]
		}
		host, _, _ := strings.Cut(rest, "/")
		host, _, _ = strings.Cut(host, "?")
		return scheme + "://" + host + "/…"
	}
	var b strings.Builder
	b.WriteString(u.Scheme + "://")
	if u.User != nil {
		b.WriteString("***@")
	}
	b.WriteString(u.Host)
	b.WriteString(u.EscapedPath())
	if u.RawQuery != "" || u.ForceQuery {
		b.WriteByte('?')
		for i, kv := range strings.Split(u.RawQuery, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			if k, v, ok := strings.Cut(kv, "="); ok && v != "" {
				kv = k + "=***"
			}
			b.WriteString(kv)
		}
	}
	if u.Fragment != "" {
		b.WriteString("#***")
	}
	return b.String()
}

// redactedError is an error whose text has its URLs' secrets hidden
// (redactURLs); errors.Is and errors.As still see the error it hides.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact hides the secrets of the URLs in err's text, for a server
// reached over HTTP or SSE; err is returned as it is when its text has
// none.
func redact(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if r := redactURLs(msg); r != msg {
		return &redactedError{msg: r, err: err}
	}
	return err
}

// redactingHandler hides the secrets of the URLs in the messages and
// attributes that the MCP client's transports log (a request that
// failed, naming its URL), as redact does for the errors.
type redactingHandler struct{ slog.Handler }

func (h redactingHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, redactURLs(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	for i, a := range attrs {
		attrs[i] = redactAttr(a)
	}
	return redactingHandler{h.Handler.WithAttrs(attrs)}
}

func (h redactingHandler) WithGroup(name string) slog.Handler {
	return redactingHandler{h.Handler.WithGroup(name)}
}

func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, redactURLs(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, x := range g {
			out[i] = redactAttr(x)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, redactURLs(err.Error()))
		}
		if s, ok := v.Any().(fmt.Stringer); ok {
			return slog.String(a.Key, redactURLs(s.String()))
		}
	default: // numbers, times and the like hold no URL
	}
	return a
}
