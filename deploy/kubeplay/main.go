// Command kubeplay turns the rendered Kubernetes manifests (kubectl
// kustomize deploy/kubernetes) into what `podman kube play` runs on one
// machine, for deploy/kube-play.sh. Podman runs Deployments and ConfigMaps
// but has no Services, no cluster DNS and one pod per Deployment, so:
//
//   - each Deployment (and the StatefulSet) becomes one single-replica
//     Deployment per replica (gateway-0, gateway-1, …), each pod with a
//     static address on one network (-subnet), in the order of -ips;
//   - each Service name resolves, through hostAliases in every pod, to
//     the addresses of the pods its selector picks, as a headless
//     Service's DNS name does;
//   - Secrets become ConfigMaps of the same keys (podman mounts those);
//   - the StatefulSet's volume claim becomes an emptyDir, and container
//     ports are dropped (podman would publish them on the host);
//   - -tokens and -mcp-server fill in the tokens Secret and the MCP
//     server config with what the test uses;
//   - a pod whose container asks for procMount: Unmasked (sandboxd's, for
//     bwrap's /proc) is started with `podman run` instead, since podman
//     4's kube play ignores that field: -podman-run gets the commands,
//     with the same settings spelled as podman flags (unmask=ALL,
//     seccomp=unconfined, --userns auto for hostUsers: false, …).
//
// Services, NetworkPolicies, PodDisruptionBudgets, the
// HorizontalPodAutoscaler and the Namespace are left out and listed on
// stderr: podman has nothing that enforces them.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

var (
	subnet    = flag.String("subnet", "10.89.77", "first three octets of the pods' addresses")
	ipsFile   = flag.String("ips", "", "write the pods' addresses here, one per line, in pod order, for podman kube play --ip")
	podsFile  = flag.String("pods", "", "write \"NAME ADDRESS\" per pod here")
	tokens    = flag.String("tokens", "", "the gateway's tokens file content")
	mcpServer = flag.String("mcp-server", "", "a stdio MCP server script that discoveryd runs with python3 as server \"echo\"")
	network   = flag.String("network", "codeexec-kube-play", "the podman network of the pods")
	runScript = flag.String("podman-run", "", "write here the podman commands that start the pods kube play cannot (procMount: Unmasked)")
)

func main() {
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kubeplay:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out, stderr io.Writer) error {
	docs, err := readDocs(in)
	if err != nil {
		return err
	}
	var (
		configs   []obj
		workloads []obj
		services  []obj
		skipped   []string
	)
	for _, o := range docs {
		switch kind(o) {
		case "ConfigMap":
			configs = append(configs, o)
		case "Secret":
			configs = append(configs, secretToConfigMap(o))
		case "Deployment", "StatefulSet":
			workloads = append(workloads, o)
		case "Service":
			services = append(services, o)
			skipped = append(skipped, "Service/"+name(o)+" (resolved through hostAliases)")
		default:
			skipped = append(skipped, kind(o)+"/"+name(o))
		}
	}
	for _, c := range configs {
		patchConfig(c)
	}
	pods, err := podsOf(workloads)
	if err != nil {
		return err
	}
	aliases, names := serviceAliases(services, pods)
	for _, c := range configs {
		if err := emit(out, c); err != nil {
			return err
		}
	}
	var f files
	f.script.WriteString("set -eu\n")
	for _, p := range pods {
		if err := f.add(out, p, aliases); err != nil {
			return err
		}
	}
	if err := f.write(); err != nil {
		return err
	}
	sort.Strings(skipped)
	fmt.Fprintf(stderr, "kubeplay: %d pods; services %s\nkubeplay: not run by podman: %s\n", len(pods), strings.Join(names, " "), strings.Join(skipped, ", "))
	return nil
}

// readDocs reads every document of the rendered manifests.
func readDocs(in io.Reader) ([]obj, error) {
	var docs []obj
	dec := yaml.NewDecoder(in)
	for {
		var o obj
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if d, ok := normalise(o).(obj); ok {
			docs = append(docs, d)
		}
	}
}

// pod is one replica of a workload, with its address.
type pod struct {
	name, ip string
	labels   obj
	spec     obj
	meta     obj
}

// podsOf makes one pod per replica of each workload, each with its
// address; a StatefulSet's volume claims become emptyDirs.
func podsOf(workloads []obj) ([]pod, error) {
	var pods []pod
	for _, w := range workloads {
		n := 1
		if r, ok := get(w, "spec", "replicas").(int); ok {
			n = r
		}
		for i := range n {
			tmpl, _ := deepCopy(get(w, "spec", "template")).(obj)
			spec := mapping(tmpl, "spec")
			if spec == nil {
				return nil, fmt.Errorf("%s/%s has no spec.template.spec", kind(w), name(w))
			}
			for _, vct := range list(w, "spec", "volumeClaimTemplates") {
				vols, _ := spec["volumes"].([]any)
				spec["volumes"] = append(vols, obj{"name": str(vct, "metadata", "name"), "emptyDir": obj{}})
			}
			meta, _ := tmpl["metadata"].(obj)
			labels, _ := meta["labels"].(obj)
			pods = append(pods, pod{name: fmt.Sprintf("%s-%d", name(w), i), ip: fmt.Sprintf("%s.%d", *subnet, 10+len(pods)), labels: labels, spec: spec, meta: meta})
		}
	}
	return pods, nil
}

// serviceAliases resolves each Service's name to the addresses of the
// pods its selector picks, as hostAliases, and describes each for the log.
func serviceAliases(services []obj, pods []pod) (aliases []any, names []string) {
	for _, s := range services {
		sel, _ := get(s, "spec", "selector").(obj)
		var ips []string
		for _, p := range pods {
			if matches(sel, p.labels) {
				ips = append(ips, p.ip)
			}
		}
		for _, ip := range ips {
			aliases = append(aliases, obj{"ip": ip, "hostnames": []any{name(s), name(s) + ".codeexec.svc.cluster.local"}})
		}
		names = append(names, fmt.Sprintf("%s=%s", name(s), strings.Join(ips, ",")))
	}
	return aliases, names
}

// files gathers what kubeplay writes beside the manifests: the addresses
// for kube play, the pods, and the podman commands of the pods kube play
// cannot start.
type files struct {
	ipList, podList, script bytes.Buffer
}

// add emits p as a single-replica Deployment on out, or, when kube play
// cannot start it, as podman commands in the script.
func (f *files) add(out io.Writer, p pod, aliases []any) error {
	if needsRun(p.spec) {
		if err := podmanRun(&f.script, p.name, p.ip, p.spec, aliases); err != nil {
			return fmt.Errorf("pod %s: %w", p.name, err)
		}
		fmt.Fprintf(&f.podList, "%s %s\n", p.name, p.ip)
		return nil
	}
	secretVolumesToConfigMaps(p.spec)
	// podman publishes a containerPort on the host, where two
	// replicas would collide; in a cluster it only names the port.
	for _, c := range list(p.spec, "containers") {
		if c, ok := c.(obj); ok {
			delete(c, "ports")
		}
	}
	p.spec["hostAliases"] = aliases
	p.spec["hostname"] = p.name
	d := obj{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": obj{"name": p.name, "labels": p.labels},
		"spec": obj{
			"replicas": 1,
			"selector": obj{"matchLabels": p.labels},
			"template": obj{"metadata": p.meta, "spec": p.spec},
		},
	}
	if err := emit(out, d); err != nil {
		return err
	}
	fmt.Fprintln(&f.ipList, p.ip)
	fmt.Fprintf(&f.podList, "%s %s\n", p.name, p.ip)
	return nil
}

// write writes the files the flags name.
func (f *files) write() error {
	for _, w := range []struct {
		path string
		data *bytes.Buffer
		mode os.FileMode
	}{{*ipsFile, &f.ipList, 0o644}, {*runScript, &f.script, 0o755}, {*podsFile, &f.podList, 0o644}} {
		if w.path == "" {
			continue
		}
		if err := os.WriteFile(w.path, w.data.Bytes(), w.mode); err != nil {
			return err
		}
	}
	return nil
}

// patchConfig fills in the test's tokens and MCP server.
func patchConfig(c obj) {
	data, _ := c["data"].(obj)
	switch name(c) {
	case "codeexec-tokens":
		if *tokens != "" {
			data["tokens"] = *tokens
		}
	case "codeexec-mcp-servers":
		if *mcpServer != "" {
			b, err := os.ReadFile(*mcpServer)
			if err != nil {
				fmt.Fprintln(os.Stderr, "kubeplay:", err)
				os.Exit(1)
			}
			data[filepath.Base(*mcpServer)] = string(b)
			data["mcp-servers.json"] = fmt.Sprintf(`{"mcpServers": {"echo": {"command": "python3", "args": ["/etc/codeexec/mcp/%s"]}}}`, filepath.Base(*mcpServer))
		}
	}
}

// secretToConfigMap keeps a Secret's name and keys.
func secretToConfigMap(s obj) obj {
	data := obj{}
	if sd, ok := s["stringData"].(obj); ok {
		for k, v := range sd {
			data[k] = v
		}
	}
	return obj{"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj{"name": name(s)}, "data": data}
}

func secretVolumesToConfigMaps(spec obj) {
	for _, v := range list(spec, "volumes") {
		vol, _ := v.(obj)
		if sec, ok := vol["secret"].(obj); ok {
			delete(vol, "secret")
			vol["configMap"] = obj{"name": sec["secretName"]}
		}
	}
}

func matches(sel, labels obj) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
