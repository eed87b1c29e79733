package mcpfix

import (
	"context"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/server"
)

// Stdio wraps the two ends of the stdio transport in its fixes. Each
// reads only whole messages, which mcp-go writes in one Write call each.
func Stdio(in io.Reader, out io.Writer) (io.Reader, io.Writer) {
	in, out = BatchStdio(in, out)
	out = CursorWriter(out)
	in, out = NotFoundStdio(in, out)
	in, out = InvalidParamsStdio(in, out)
	return CancelledStdio(in, out)
}

// HTTP wraps mcp-go's streamable HTTP handler in its fixes, and those in
// bodies (the gateway's body limiter, package bodylimit), outermost, so
// that nothing reads a body before it is bounded: mcp-go reads a whole
// body into memory and has no limit of its own. Detach is not among them:
// the gateway calls it where it tracks the requests it detaches.
func HTTP(inner http.Handler, bodies func(http.Handler) http.Handler) http.Handler {
	h := NotFoundHandler(InvalidParamsHandler(ListenAckHandler(inner)))
	h = CursorHandler(h)
	h = NoSessionHandler(h)
	h = BatchHandler(h)
	return bodies(h)
}

// AddHooks adds the fixes that are mcp-go hooks: the reroute of a call to
// a tool not among tools(ctx), the tools its request may call, to the
// first one's handler, and the wait for a listen stream's
// acknowledgement.
func AddHooks(h *server.Hooks, tools func(context.Context) []string) {
	h.AddBeforeCallTool(routeUnknownTool(tools))
	h.AddAfterSubscriptionsListen(AfterListen)
}
