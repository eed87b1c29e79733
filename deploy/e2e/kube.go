package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// kube checks the Kubernetes manifests as deploy/kube-play.sh runs them
// under podman: through every gateway replica in -gateway (comma
// separated), a client with a bearer token completes run_python, a memory
// save that the other replica's session loads, and a call of the echo
// tool of the MCP server that discoveryd proxies, all from sandboxes that
// bwrap starts inside the sandboxd pods.
func kube(ctx context.Context) error {
	urls := strings.Split(*gatewayURL, ",")
	for i, url := range urls {
		s, err := openWithin(ctx, url, time.Minute)
		if err != nil {
			return fmt.Errorf("gateway %s: %w", url, err)
		}
		defer s.c.Close()
		out, err := s.must(ctx, "import sys\nprint(sum(range(10)), sys.version_info[0])")
		if err != nil || out != "45 3" {
			return wrong("gateway "+url+": run_python", out, err)
		}
		key := fmt.Sprintf("kube-%d", i)
		if _, err := s.must(ctx, fmt.Sprintf("save_memory(%q, {'via': %q})", key, url)); err != nil {
			return fmt.Errorf("gateway %s: save_memory: %w", url, err)
		}
		text, out, isErr, err := s.run(ctx, "r = await mcp_echo.echo(text='through the pods')\nprint(r['content'][0]['text'])", "echo")
		if err != nil || isErr || out != "through the pods" {
			return wrong(fmt.Sprintf("gateway %s: the proxied echo call (text %q, isError %v)", url, text, isErr), out, err)
		}
		fmt.Printf("gateway %s: run_python, save_memory and mcp_echo.echo passed\n", url)
	}
	// Each memory is visible through the other gateway: one memoryd
	// database behind every replica.
	for i, url := range urls {
		s, err := openAt(ctx, url)
		if err != nil {
			return err
		}
		defer s.c.Close()
		other := (i + 1) % len(urls)
		out, err := s.must(ctx, fmt.Sprintf("print(load_memory('kube-%d')['via'])", other))
		if err != nil || out != urls[other] {
			return wrong(fmt.Sprintf("gateway %s: load_memory of what %s saved", url, urls[other]), out, err)
		}
	}
	fmt.Println("e2e: kube: PASS")
	return nil
}

// openWithin retries open until the gateway answers: its pods may still
// be starting.
func openWithin(ctx context.Context, url string, d time.Duration) (*session, error) {
	deadline := time.Now().Add(d)
	for {
		s, err := openAt(ctx, url)
		if err == nil {
			if _, err = s.must(ctx, "pass"); err == nil {
				return s, nil
			}
			_ = s.c.Close()
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(time.Second)
	}
}
