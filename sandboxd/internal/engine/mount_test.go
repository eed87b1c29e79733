package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMount(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	file := filepath.Join(dir, "file")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec string
		want Mount
		err  string
	}{
		{spec: data, want: Mount{Host: data, Sandbox: "/mnt/data"}},
		{spec: data + ":/mnt/in/deep", want: Mount{Host: data, Sandbox: "/mnt/in/deep"}},
		{spec: data + ":rw", want: Mount{Host: data, Sandbox: "/mnt/data", Writable: true}},
		{spec: data + ":/mnt/x:ro", want: Mount{Host: data, Sandbox: "/mnt/x"}},
		{spec: link, want: Mount{Host: data, Sandbox: "/mnt/data"}},
		{spec: "", err: "write HOST_DIR"},
		{spec: "data", err: "not an absolute path"},
		{spec: filepath.Join(dir, "missing"), err: "no such file or directory"},
		{spec: file, err: "is not a directory"},
		{spec: data + ":relative", err: "clean absolute path"},
		{spec: data + ":/", err: "clean absolute path"},
		{spec: data + ":/mnt/../etc", err: "clean absolute path"},
		{spec: data + ":/mnt", err: "below /mnt"},
		{spec: data + ":/srv/in", err: "below /mnt"},
		{spec: data + ":/workspace/in", err: "below /mnt"},
		{spec: data + ":/usr/local", err: "below /mnt"},
		{spec: data + ":/opt", err: "below /mnt"},
		{spec: data + ":/a:/b", err: "write HOST_DIR"},
	} {
		got, err := ParseMount(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseMount(%q) = %v, %v; want an error with %q", tc.spec, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseMount(%q) = %v, %v; want %v", tc.spec, got, err, tc.want)
		}
	}
}

func TestCheckMounts(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	for _, tc := range []struct {
		name   string
		mounts []Mount
		err    string
	}{
		{"apart", []Mount{{Host: "/srv/a", Sandbox: "/mnt/a"}, {Host: "/srv/b", Sandbox: "/mnt/b"}}, ""},
		{"same sandbox path", []Mount{{Host: "/srv/a", Sandbox: "/mnt/a"}, {Host: "/srv/b", Sandbox: "/mnt/a"}}, "overlap in the sandbox"},
		{"nested sandbox paths", []Mount{{Host: "/srv/a", Sandbox: "/mnt/a"}, {Host: "/srv/b", Sandbox: "/mnt/a/b"}}, "overlap in the sandbox"},
		{"the state dir", []Mount{{Host: state, Sandbox: "/mnt/s"}}, "overlaps the state directory"},
		{"inside the state dir", []Mount{{Host: filepath.Join(state, "MCPs"), Sandbox: "/mnt/s"}}, "overlaps the state directory"},
		{"above the state dir", []Mount{{Host: filepath.Dir(state), Sandbox: "/mnt/s"}}, "overlaps the state directory"},
		{"the root", []Mount{{Host: "/", Sandbox: "/mnt/s"}}, "overlaps the state directory"},
	} {
		err := CheckMounts(tc.mounts, state)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: CheckMounts = %v, want %q", tc.name, err, tc.err)
		}
	}
}
