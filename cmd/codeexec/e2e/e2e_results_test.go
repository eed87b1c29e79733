package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	_ "image/jpeg" // decodes the JPEG images a result may carry
	_ "image/png"  // and the PNG ones
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// resultCalls are the calls TestE2EResultsForAModel makes, in order.
var resultCalls = []map[string]any{
	pyCall("import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 3, 2])\nplt.title('t')"),
	pyCall("from PIL import Image\ndisplay(Image.new('RGB', (300, 200), 'red'))"),
	pyCall("a = 6\na * 7"),
	pyCall("for i in range(1_000_000):\n    print('line %07d' % i)\nprint('answer=42')"),
	pyCall("import glob\nf = sorted(glob.glob('/workspace/.codeexec/output/*.stdout'))[-1]\n" +
		"lines = open(f).read().splitlines()\nprint(len(lines), lines[-1])"),
}

// The official SDK client, over stdio and over HTTP, gets a matplotlib
// figure and a PIL image as image content of their own sizes, a bare last
// expression's value, and a 10 MB print as a result under the output
// budget whose tail is kept and whose whole output the next call reads.
func TestE2EResultsForAModel(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			spec := map[string]any{"calls": resultCalls}
			if transport == "stdio" {
				spec["transport"], spec["command"], spec["args"] = "stdio", harness.Binary, []string{"serve"}
				spec["env"] = envMap(harness.BaseEnv(t, nil))
			} else {
				spec["transport"], spec["url"] = "http", harness.StartHTTP(t, nil)+"/mcp"
			}
			checkResults(t, harness.SDKClient(t, spec))
		})
	}
}

func checkResults(t *testing.T, out harness.SDKResult) {
	t.Helper()
	if len(out.Results) != len(resultCalls) {
		t.Fatalf("got %d results, want %d", len(out.Results), len(resultCalls))
	}
	for i, want := range [][2]int{{400, 300}, {300, 200}} {
		res := out.Results[i]
		if text := textOf(res); strings.Contains(text, "ImportError") || strings.Contains(text, "ModuleNotFoundError") {
			t.Errorf("call %d: the sandbox's Python cannot import matplotlib or Pillow, which the environment with the data stack provides (codeexec env build; a host /usr sandbox needs python3-matplotlib, python3-pil and the host's /etc/alternatives for libblas): %.300s", i, text)
			continue
		}
		images := imagesOf(t, res)
		if len(images) != 1 || images[0].Bounds().Dx() != want[0] || images[0].Bounds().Dy() != want[1] {
			t.Errorf("call %d: images %v, want one of %dx%d; result %.500v", i, boundsOf(images), want[0], want[1], res)
		}
		if _, ok := res["structuredContent"]; ok {
			t.Errorf("call %d: a result with an image carries structuredContent, which Claude Code would show instead", i)
		}
	}
	if got := textOf(out.Results[2]); got != "42" {
		t.Errorf("last expression: text %q, want 42", got)
	}

	big := textOf(out.Results[3])
	if len(big) > 40000+600 {
		t.Errorf("the 10 MB print gave %d characters of text, over the 40,000 budget", len(big))
	}
	if !strings.HasPrefix(big, "line 0000000\n") || !strings.HasSuffix(big, "line 0999999\nanswer=42") {
		t.Errorf("the 10 MB print lost its head or tail: %q … %q", big[:min(80, len(big))], big[max(0, len(big)-80):])
	}
	marker := regexp.MustCompile(`\[… [\d,]+ characters of stdout left out: the whole stdout of this call is in (/workspace/\.codeexec/output/\S+\.stdout); read or grep it in the next call …\]`)
	if !marker.MatchString(big) {
		t.Errorf("no marker naming the file in %q", big[19000:min(21000, len(big))])
	}
	if _, ok := out.Results[3]["structuredContent"]; ok {
		t.Error("the large result carries its text twice (structuredContent too)")
	}
	if got := textOf(out.Results[4]); got != "1000001 answer=42" {
		t.Errorf("reading the kept output: %q", got)
	}
}

// textOf joins the text content of a result.
func textOf(res map[string]any) string {
	var b strings.Builder
	for _, c := range contentOf(res) {
		if c["type"] == "text" {
			s, _ := c["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

func contentOf(res map[string]any) []map[string]any {
	list, _ := res["content"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// imagesOf decodes the image content of a result.
func imagesOf(t *testing.T, res map[string]any) []image.Image {
	t.Helper()
	var out []image.Image
	for _, c := range contentOf(res) {
		if c["type"] != "image" {
			continue
		}
		data, _ := c["data"].(string)
		raw, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			t.Fatalf("image data is not base64: %v", err)
		}
		im, format, err := image.Decode(bytes.NewReader(raw))
		if err != nil || "image/"+format != c["mimeType"] {
			t.Fatalf("image of %q does not decode as such: %v (%s)", c["mimeType"], err, format)
		}
		out = append(out, im)
	}
	return out
}

func boundsOf(images []image.Image) []image.Rectangle {
	out := make([]image.Rectangle, len(images))
	for i, im := range images {
		out[i] = im.Bounds()
	}
	return out
}

// pyCall is one run_python call.
func pyCall(code string) map[string]any {
	return map[string]any{"name": "run_python", "arguments": map[string]any{"code": code}}
}

// envMap is an environment list as a map.
func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// Files a call writes under /workspace/out come back as resource_link
// content; resources/read serves them, text as text and binary as a
// blob, to the tenant that owns the session, and another tenant's read
// of the same URI is refused as an unknown resource.
func TestE2EOutFilesAreResources(t *testing.T) {
	t.Parallel()
	tokens := harness.TokensFile(t, map[string]string{"alpha-token": "alpha", "beta-token": "beta"})
	base := harness.StartAuthHTTP(t, map[string]string{"CODEEXEC_TOKENS_FILE": tokens})
	spec := func(token string) map[string]any {
		return map[string]any{"transport": "http", "url": base + "/mcp", "headers": map[string]string{"Authorization": "Bearer " + token}}
	}
	alpha := spec("alpha-token")
	alpha["calls"] = []map[string]any{pyCall("import os\nos.makedirs('/workspace/out/sub', exist_ok=True)\n" +
		"open('/workspace/out/report.csv', 'w').write('a,b\\n1,2\\n')\n" +
		"open('/workspace/out/sub/blob.bin', 'wb').write(bytes(range(256)))")}
	alpha["readLinks"] = true
	out := harness.SDKClient(t, alpha)
	res := out.Results[0]
	var links []map[string]any
	for _, c := range contentOf(res) {
		if c["type"] == "resource_link" {
			links = append(links, c)
		}
	}
	if len(links) != 2 {
		t.Fatalf("want 2 resource links, got %v", res)
	}
	if links[0]["name"] != "report.csv" || links[0]["mimeType"] != "text/csv; charset=utf-8" && links[0]["mimeType"] != "text/csv" ||
		links[0]["size"] != float64(8) || !strings.HasPrefix(links[0]["uri"].(string), "codeexec://session/") {
		t.Errorf("first link: %v", links[0])
	}
	if !strings.Contains(textOf(res), "[files in /workspace/out: report.csv (8 bytes), sub/blob.bin (256 bytes)]") {
		t.Errorf("the text does not name the files: %q", textOf(res))
	}
	if _, ok := res["structuredContent"]; ok {
		t.Error("a result with links carries structuredContent, which Claude Code would show instead")
	}
	if len(out.Reads) != 2 || out.Reads[0].Result == nil || out.Reads[1].Result == nil {
		t.Fatalf("reads: %+v", out.Reads)
	}
	if got := out.Reads[0].Result.Contents[0]["text"]; got != "a,b\n1,2\n" {
		t.Errorf("report.csv read as %v", out.Reads[0].Result.Contents[0])
	}
	blob, _ := base64.StdEncoding.DecodeString(fmt.Sprint(out.Reads[1].Result.Contents[0]["blob"]))
	if len(blob) != 256 || blob[255] != 255 {
		t.Errorf("blob.bin read as %v", out.Reads[1].Result.Contents[0])
	}

	beta := spec("beta-token")
	beta["reads"] = []string{links[0]["uri"].(string), "codeexec://session/0123/out/x"}
	other := harness.SDKClient(t, beta)
	for _, r := range other.Reads {
		if r.Error == nil || !strings.Contains(r.Error.Message, "unknown session") {
			t.Errorf("another tenant read %s: %+v", r.URI, r)
		}
	}
}

// `serve --mount` shows a host directory read-only at /mnt/<basename>,
// and a :rw one writable; a mount that is missing, not a directory, or
// overlaps the state dir is refused at start, saying which.
func TestE2EMounts(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	data, out := filepath.Join(top, "data"), filepath.Join(top, "out")
	for _, d := range []string{top, data, out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Chmod(filepath.Dir(top), 0o755)
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "in.csv"), []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Hostile links in the mount lead nowhere: they resolve in the
	// sandbox, where neither the host's files nor the state dir exist.
	home := t.TempDir()
	for name, target := range map[string]string{"shadow": "/etc/shadow", "state": filepath.Join(home, "MCPs"), "up": "../../.."} {
		if err := os.Symlink(target, filepath.Join(data, name)); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := harness.StartStdio(t, map[string]string{"CODEEXEC_MOUNTS": data + "," + out + ":/mnt/results:rw",
		"HOME": home, "MCP_BRIDGE_STATE_DIR": filepath.Join(home, "MCPs")})
	o := harness.Code(t, c, fmt.Sprintf(`seen = []
for p in ['/mnt/data/shadow', '/mnt/data/state/codeexec.db', '/mnt/data/up%[1]s/MCPs/codeexec.db', '%[1]s/MCPs/codeexec.db']:
    try:
        open(p, 'rb').read(1)
        seen.append(p)
    except OSError:
        pass
print(seen)`, home))
	if got := harness.Joined(o.Stdout()); got != "[]" {
		t.Errorf("links in a mount reached host files: %s", got)
	}
	o = harness.Code(t, c, "import errno\nprint(open('/mnt/data/in.csv').read().splitlines()[1])\n"+
		"try:\n    open('/mnt/data/new', 'w')\nexcept OSError as e:\n    print(errno.errorcode[e.errno])\n"+
		"open('/mnt/results/r.txt', 'w').write('done');")
	if got := harness.Joined(o.Stdout()); got != "1,2\nEROFS" {
		t.Errorf("read-only mount: %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(out, "r.txt")); err != nil || string(b) != "done" {
		t.Errorf("the :rw mount's file on the host: %q, %v", b, err)
	}

	state := t.TempDir()
	file := filepath.Join(top, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ mount, want string }{
		{filepath.Join(top, "missing"), "no such file or directory"},
		{file, "is not a directory"},
		{state, "overlaps the state directory"},
	} {
		env := harness.BaseEnv(t, map[string]string{"MCP_BRIDGE_STATE_DIR": state})
		cmd := exec.Command(harness.Binary, "serve", "--mount", tc.mount)
		cmd.Env = env
		cmd.Stdin = strings.NewReader("")
		outb, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(outb), tc.want) {
			t.Errorf("serve --mount %s: %v, want a refusal with %q:\n%s", tc.mount, err, tc.want, harness.TailOf(string(outb), 2000))
		}
	}
}
