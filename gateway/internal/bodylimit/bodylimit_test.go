package bodylimit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestOutsideLongestString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int
	}{
		{``, 0},
		{`{"code":"print(1)"}`, len(`{"code":}`)},
		{`{"code":"a\"b\\","x":[1,2,3]}`, len(`{"code":,"x":[1,2,3]}`)},
		{`[1,2,3,4]`, 9},
		{`{"a":"xx","b":"yyyy"}`, len(`{"a":"xx","b":}`)},
		{`"unterminated`, 0},
	} {
		if got := outsideLongestString([]byte(tc.in)); got != tc.want {
			t.Errorf("outsideLongestString(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// serve runs one POST of body through Handler with lim, as tenant, and
// returns the answer and what next read.
func serve(t *testing.T, opts Options, tenant, body string, chunked bool) (*httptest.ResponseRecorder, string) {
	t.Helper()
	var got string
	next := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = string(b)
	})
	opts.Tenant = func(*http.Request) string { return tenant }
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	if chunked {
		req.ContentLength = -1
	}
	w := httptest.NewRecorder()
	Handler(next, opts).ServeHTTP(w, req)
	return w, got
}

func TestHandlerBounds(t *testing.T) {
	t.Parallel()
	lim := Limits{Request: 100, Outside: 20, Tenant: 150, Total: 250}
	var mu sync.Mutex
	refused := map[string]int{}
	opts := Options{Limits: lim, Budget: NewBudget(lim), Hint: "send less", Refused: func(r string) {
		mu.Lock()
		defer mu.Unlock()
		refused[r]++
	}}
	code := `{"code":"` + strings.Repeat("x", 60) + `"}`
	for _, tc := range []struct {
		name    string
		body    string
		chunked bool
		status  int
		want    string
	}{
		{"within every bound", code, false, http.StatusOK, ""},
		{"within every bound, chunked", code, true, http.StatusOK, ""},
		{"over the request cap", strings.Repeat("x", 101), false, http.StatusRequestEntityTooLarge, "over 100 bytes (0 MiB), the most this endpoint accepts; send less"},
		{"over the request cap, chunked", strings.Repeat("x", 101), true, http.StatusRequestEntityTooLarge, "over 100 bytes"},
		{"too much outside the code", `{"code":"x","junk":[1,1,1,1,1,1,1,1,1,1,1]}`, false, http.StatusRequestEntityTooLarge, "outside the longest string"},
	} {
		w, got := serve(t, opts, "t", tc.body, tc.chunked)
		if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%s: %d %s; want %d with %q", tc.name, w.Code, w.Body, tc.status, tc.want)
		}
		if tc.status == http.StatusOK && got != tc.body {
			t.Errorf("%s: next read %q, want the body", tc.name, got)
		}
	}
	if n := opts.Budget.InFlight(); n != 0 {
		t.Errorf("%d bytes in flight after every request was answered", n)
	}
	// A tenant holding 80 bytes is refused 80 more (429); another tenant
	// is not, until the total (250) is reached (503).
	if ref := opts.Budget.take("t", 80); ref != nil {
		t.Fatal(ref.msg)
	}
	w, _ := serve(t, opts, "t", code, false)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "this tenant has 80 bytes of requests in flight") || w.Header().Get("Retry-After") == "" {
		t.Errorf("over the tenant's bytes in flight: %d %s %v", w.Code, w.Body, w.Header())
	}
	if ref := opts.Budget.take("u", 100); ref != nil {
		t.Fatal(ref.msg)
	}
	w, _ = serve(t, opts, "v", code, false)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "the server has 180 bytes of requests in flight") {
		t.Errorf("over the bytes in flight in all: %d %s", w.Code, w.Body)
	}
	want := map[string]int{RefusedRequest: 2, RefusedOutside: 1, RefusedTenant: 1, RefusedTotal: 1}
	for k, v := range want {
		if refused[k] != v {
			t.Errorf("refusals %v, want %v", refused, want)
			break
		}
	}
}

// A body that stops arriving is answered 408 once its read times out.
func TestHandlerReadTimeout(t *testing.T) {
	t.Parallel()
	lim := Limits{Request: 1000, ReadTimeout: 200 * time.Millisecond}
	srv := httptest.NewServer(Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("a body that never arrived reached next")
	}), Options{Limits: lim, Budget: NewBudget(lim), Tenant: func(*http.Request) string { return "t" }}))
	defer srv.Close()
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte(`{"code":`)) }()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, pr)
	req.ContentLength = 100
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive within 200ms") {
		t.Errorf("a stalled body: %d %s", resp.StatusCode, b)
	}
}
