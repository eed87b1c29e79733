package result

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/gateway/internal/toon"
)

// Mode selects how results are rendered.
type Mode int

const (
	// Compact renders plain text and a trimmed structuredContent (default).
	Compact Mode = iota
	// TOON renders a ```toon block and the full payload.
	TOON
)

// ParseMode maps MCP_BRIDGE_OUTPUT_MODE to a Mode. As upstream does, an
// empty value or "compact" selects Compact and any other value selects TOON;
// known is false for a value other than those and "toon", for the caller
// to warn of.
func ParseMode(s string) (m Mode, known bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "compact":
		return Compact, true
	case "toon":
		return TOON, true
	}
	return TOON, false
}

// String returns the mode's configuration name.
func (m Mode) String() string {
	if m == TOON {
		return "toon"
	}
	return "compact"
}

// StructuredTextLimit is the most bytes of text whose result also
// carries it as structuredContent.
//
// Clients differ in what they give the model: Claude Code gives it only
// structuredContent when a result has it, dropping the text and the
// images of content (anthropics/claude-code#54737, #55677, #79944);
// others give it content alone (Open WebUI, kimi-code), or both. So a
// result carries structuredContent only when it adds little: never with
// images or resource links, which Claude Code would drop, and never past this many
// characters of text, which would reach a model twice. Without it every
// client gives the model content, where the text and the images are.
const StructuredTextLimit = 4096

// ToolResult renders p as an MCP tool result: one text content, then the
// images; structuredContent when it is small (StructuredTextLimit); and
// isError when the status is not success.
func ToolResult(p Payload, mode Mode) *mcp.CallToolResult {
	var text string
	var structured Payload
	if mode == TOON {
		// The handle is a field of the TOON block already.
		text, structured = toonText(p), p
	} else {
		text, structured = compactText(p), compactStructured(p)
	}
	content := []mcp.Content{mcp.NewTextContent(text)}
	for _, im := range p.Images {
		content = append(content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(im.Data), im.MIME))
	}
	for _, l := range p.Links {
		link := mcp.NewResourceLink(l.URI, l.Name, "a file the call wrote: /workspace/out/"+l.Name, l.MIME)
		link.Size = &l.Size
		content = append(content, link)
	}
	res := &mcp.CallToolResult{Content: content, IsError: p.IsError()}
	if len(content) == 1 && len(text) <= StructuredTextLimit {
		res.StructuredContent = structured
	}
	return res
}

// toonText fences the TOON encoding of p. The payload holds only types the
// encoder supports, so an error means a bug here; the JSON-free fallback
// keeps the result readable all the same.
func toonText(p Payload) string {
	enc, err := toon.Encode(p.fields())
	if err != nil {
		enc = "status: " + p.Status + "\nerror: " + err.Error()
	}
	return "```toon\n" + enc + "\n```"
}

// compactText is the plain-text rendering: output first, then what the model
// needs to know about a failure, with no noise on success.
func compactText(p Payload) string {
	var parts []string
	hasOutput := len(p.Stdout) > 0 || len(p.Stderr) > 0
	if len(p.Stdout) > 0 {
		parts = append(parts, strings.Join(p.Stdout, "\n"))
	}
	if len(p.Stderr) > 0 {
		parts = append(parts, "stderr:\n"+strings.Join(p.Stderr, "\n"))
	}
	if !hasOutput && p.Summary != "" {
		parts = append(parts, p.Summary)
	}
	if len(p.Images) > 0 {
		parts = append(parts, imagesLine(p.Images))
	}
	if p.FilesLine != "" {
		parts = append(parts, p.FilesLine)
	}
	// Upstream adds the one-line error unless the status is error and
	// something was shown, assuming a traceback in stderr, or the summary,
	// explains it. That hides the reason when the output does not (a lost
	// connection, a killed sandbox), so for status error the line is left
	// out only when stderr already contains it, or when it repeats the
	// summary just shown. Other statuses (validation_error, timeout)
	// always show it, as upstream does.
	if p.Error != "" && (p.Status != StatusError ||
		(hasOutput && !strings.Contains(strings.Join(p.Stderr, "\n"), p.Error)) ||
		(!hasOutput && p.Error != p.Summary)) {
		parts = append(parts, "error: "+p.Error)
	}
	if p.ExitCode != nil && *p.ExitCode != 0 {
		parts = append([]string{"exit: " + strconv.Itoa(*p.ExitCode)}, parts...)
	}
	if p.Status != StatusSuccess {
		parts = append([]string{"status: " + p.Status}, parts...)
	}
	if p.NewSession {
		parts = append(parts, SessionLine(p.Session))
	}
	text := strings.Join(parts, "\n")
	if text == "" {
		return StatusSuccess
	}
	return text
}

// SessionLine is the one line a new session's first result adds to its
// text, so that a model that reads only text learns the handle.
func SessionLine(handle string) string {
	return "session: " + handle + ` (pass session="` + handle + `" to continue it)`
}

// compactStructured keeps what the compact text shows: status and exit code
// only when they are not the happy default, and the summary only when it
// carries information (a failure, or no stdout to speak for itself).
func compactStructured(p Payload) Payload {
	out := Payload{
		Servers:        p.Servers,
		Stdout:         p.Stdout,
		Stderr:         p.Stderr,
		Error:          p.Error,
		TimeoutSeconds: p.TimeoutSeconds,
		Session:        p.Session,
	}
	if p.Status != StatusSuccess {
		out.Status = p.Status
	}
	if p.ExitCode != nil && *p.ExitCode != 0 {
		out.ExitCode = p.ExitCode
	}
	if p.Status != StatusSuccess || len(p.Stdout) == 0 {
		out.Summary = p.Summary
	}
	return out
}

// imagesLine names the result's images in the text, for a model whose
// client shows it the text alone.
func imagesLine(images []Image) string {
	parts := make([]string, len(images))
	for i, im := range images {
		parts[i] = fmt.Sprintf("%dx%d %s", im.Width, im.Height, strings.TrimPrefix(im.MIME, "image/"))
	}
	noun := "images"
	if len(images) == 1 {
		noun = "image"
	}
	return fmt.Sprintf("[%d %s: %s]", len(images), noun, strings.Join(parts, ", "))
}
