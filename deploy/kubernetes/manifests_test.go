// Package kubernetes holds the suite's kustomize manifests; its test
// renders them with kubectl and checks what docs/KUBERNETES.md promises.
package kubernetes

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// object is one rendered manifest, as generic YAML.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) name() string { return str(o, "metadata", "name") }

// get walks maps by key. yaml.v3 decodes nested maps into the named map
// type of the root, object.
func get(v any, path ...string) any {
	for _, p := range path {
		var m map[string]any
		switch x := v.(type) {
		case object:
			m = x
		case map[string]any:
			m = x
		default:
			return nil
		}
		v = m[p]
	}
	return v
}

func str(v any, path ...string) string { s, _ := get(v, path...).(string); return s }
func list(v any, path ...string) []any { l, _ := get(v, path...).([]any); return l }

// render runs kubectl kustomize on this directory.
func render(t *testing.T) []object {
	t.Helper()
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatal("kubectl is not installed (scripts/install-tools.sh installs it): it renders the manifests")
	}
	var stderr bytes.Buffer
	cmd := exec.Command("kubectl", "kustomize", ".")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, stderr.String())
	}
	var objs []object
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	return objs
}

func find(objs []object, kind, name string) object {
	for _, o := range objs {
		if o.kind() == kind && o.name() == name {
			return o
		}
	}
	return nil
}

func TestManifests(t *testing.T) {
	t.Parallel()
	objs := render(t)
	for _, o := range objs {
		if o.kind() != "Namespace" && str(o, "metadata", "namespace") != "codeexec" {
			t.Errorf("%s %s is not in namespace codeexec", o.kind(), o.name())
		}
	}
	for name, least := range map[string]int{"gateway": 2, "memoryd": 2, "discoveryd": 1, "sandboxd": 2} {
		d := find(objs, "Deployment", name)
		if d == nil {
			t.Errorf("no Deployment %s", name)
			continue
		}
		if n, _ := get(d, "spec", "replicas").(int); n < least {
			t.Errorf("Deployment %s has %d replicas, want at least %d", name, n, least)
		}
		if find(objs, "PodDisruptionBudget", name) == nil {
			t.Errorf("no PodDisruptionBudget for %s", name)
		}
		if find(objs, "Service", name) == nil {
			t.Errorf("no Service for %s", name)
		}
		pod := get(d, "spec", "template", "spec")
		if get(pod, "automountServiceAccountToken") != false {
			t.Errorf("%s mounts a service account token it does not need", name)
		}
		for _, c := range list(pod, "containers") {
			if str(c, "image") != "localhost/codeexec:latest" {
				t.Errorf("%s runs image %q", name, str(c, "image"))
			}
			for _, probe := range []string{"readinessProbe", "livenessProbe"} {
				cmd := list(c, probe, "exec", "command")
				if len(cmd) < 3 || cmd[0] != "codeexec" || cmd[1] != "health" {
					t.Errorf("%s's %s is %v, want codeexec health ADDR", name, probe, cmd)
				}
			}
			sc := get(c, "securityContext")
			if get(sc, "allowPrivilegeEscalation") != false || get(sc, "readOnlyRootFilesystem") != true || get(sc, "privileged") == true {
				t.Errorf("%s's securityContext is %v: want no privilege escalation, a read-only root, not privileged", name, sc)
			}
			if drop := list(sc, "capabilities", "drop"); !slices.Contains(drop, any("ALL")) || len(list(sc, "capabilities", "add")) > 0 {
				t.Errorf("%s's capabilities are %v: want all dropped and none added", name, get(sc, "capabilities"))
			}
		}
		if get(pod, "securityContext", "runAsNonRoot") != true {
			t.Errorf("%s may run as root", name)
		}
	}
	// What bwrap needs in sandboxd's pod, and only that.
	sb := get(find(objs, "Deployment", "sandboxd"), "spec", "template", "spec")
	c := list(sb, "containers")[0]
	if get(sb, "hostUsers") != false || str(c, "securityContext", "procMount") != "Unmasked" ||
		str(c, "securityContext", "seccompProfile", "type") != "Unconfined" {
		t.Errorf("sandboxd's pod: hostUsers %v, procMount %q, seccomp %q; bwrap needs false, Unmasked, Unconfined",
			get(sb, "hostUsers"), str(c, "securityContext", "procMount"), str(c, "securityContext", "seccompProfile", "type"))
	}
	if !slices.Contains(list(c, "args"), any("bwrap")) {
		t.Errorf("sandboxd does not run --runtime bwrap: %v", list(c, "args"))
	}
	if hpa := find(objs, "HorizontalPodAutoscaler", "sandboxd"); str(hpa, "spec", "scaleTargetRef", "name") != "sandboxd" {
		t.Errorf("no HorizontalPodAutoscaler scales sandboxd")
	}
	// memoryd over PostgreSQL, with the password from the Secret's file.
	md := list(get(find(objs, "Deployment", "memoryd"), "spec", "template", "spec"), "containers")[0]
	if args := strings.Join(toStrings(list(md, "args")), " "); !strings.Contains(args, "--store-password-file /etc/codeexec/db/password") {
		t.Errorf("memoryd's args %q do not read the password from the Secret", args)
	}
	store := str(find(objs, "ConfigMap", "codeexec-store"), "data", "CODEEXEC_STORE")
	if !strings.HasPrefix(store, "postgres://codeexec@") {
		t.Errorf("CODEEXEC_STORE = %q: want a postgres:// URL with a user and no password", store)
	}
	if find(objs, "Secret", "codeexec-tokens") == nil || !strings.Contains(strings.Join(toStrings(list(list(get(find(objs, "Deployment", "gateway"), "spec", "template", "spec"), "containers")[0], "args")), " "), "--tokens-file") {
		t.Error("the gateway does not take its tokens from the codeexec-tokens Secret")
	}
	// The sandboxes' egress.
	deny := find(objs, "NetworkPolicy", "sandboxes-deny-egress")
	if deny == nil || !slices.Contains(list(deny, "spec", "policyTypes"), any("Egress")) || len(list(deny, "spec", "egress")) != 0 {
		t.Errorf("sandboxes-deny-egress does not deny every egress: %v", get(deny, "spec"))
	}
	var allowed []string
	for _, rule := range list(find(objs, "NetworkPolicy", "sandboxd"), "spec", "egress") {
		for _, to := range list(rule, "to") {
			allowed = append(allowed, str(to, "podSelector", "matchLabels", "app.kubernetes.io/name")+str(to, "podSelector", "matchLabels", "k8s-app"))
		}
	}
	slices.Sort(allowed)
	if want := []string{"discoveryd", "kube-dns", "memoryd"}; !slices.Equal(allowed, want) {
		t.Errorf("sandboxd pods may reach %v, want only %v", allowed, want)
	}
}

func toStrings(l []any) []string {
	out := make([]string, 0, len(l))
	for _, v := range l {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}
