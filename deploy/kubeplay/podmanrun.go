package main

import (
	"fmt"
	"io"
	"strings"
)

// needsRun reports whether a pod asks for what kube play ignores.
func needsRun(spec obj) bool {
	for _, c := range list(spec, "containers") {
		if str(c, "securityContext", "procMount") == "Unmasked" {
			return true
		}
	}
	return false
}

// podmanRun writes the podman commands that start one pod as the
// manifest describes it. It refuses what it does not translate, rather
// than start something other than what the manifest says.
func podmanRun(w io.Writer, name, ip string, spec obj, aliases []any) error {
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	pod := []string{"podman", "pod", "create", "--replace", "--name", name + "-pod-0", "--network", *network, "--ip", ip, "--hostname", name}
	for _, a := range aliases {
		for _, h := range list(a, "hostnames") {
			pod = append(pod, "--add-host", fmt.Sprintf("%s:%s", h, str(a, "ip")))
		}
	}
	if get(spec, "hostUsers") == false {
		// A user namespace of the pod's own, large enough for uid 65534.
		pod = append(pod, "--userns", "auto:size=65536")
	}
	fmt.Fprintln(w, strings.Join(pod, " "))
	tmpfs := map[string]bool{}
	for _, v := range list(spec, "volumes") {
		if get(v, "emptyDir") == nil {
			return fmt.Errorf("volume %s: only emptyDir volumes are translated", str(v, "name"))
		}
		tmpfs[str(v, "name")] = true
	}
	for _, c := range list(spec, "containers") {
		args := []string{"podman", "run", "-d", "--pod", name + "-pod-0", "--name", name + "-pod-0-" + str(c, "name")}
		sc := get(c, "securityContext")
		if uid, ok := get(spec, "securityContext", "runAsUser").(int); ok {
			args = append(args, "--user", fmt.Sprintf("%d:%v", uid, get(spec, "securityContext", "runAsGroup")))
		}
		if get(sc, "readOnlyRootFilesystem") == true {
			args = append(args, "--read-only")
		}
		if get(sc, "allowPrivilegeEscalation") == false {
			args = append(args, "--security-opt", "no-new-privileges")
		}
		for _, d := range list(sc, "capabilities", "drop") {
			args = append(args, "--cap-drop", fmt.Sprint(d))
		}
		if len(list(sc, "capabilities", "add")) > 0 {
			return fmt.Errorf("container %s adds capabilities; not translated", str(c, "name"))
		}
		if str(sc, "seccompProfile", "type") == "Unconfined" {
			args = append(args, "--security-opt", "seccomp=unconfined")
		}
		if str(sc, "appArmorProfile", "type") == "Unconfined" {
			args = append(args, "--security-opt", "apparmor=unconfined")
		}
		if str(sc, "procMount") == "Unmasked" {
			args = append(args, "--security-opt", "unmask=ALL")
		}
		for _, e := range list(c, "env") {
			if get(e, "valueFrom") != nil {
				return fmt.Errorf("env %s: valueFrom is not translated", str(e, "name"))
			}
			args = append(args, "-e", q(str(e, "name")+"="+str(e, "value")))
		}
		if len(list(c, "envFrom")) > 0 {
			return fmt.Errorf("container %s: envFrom is not translated", str(c, "name"))
		}
		for _, m := range list(c, "volumeMounts") {
			if !tmpfs[str(m, "name")] {
				return fmt.Errorf("mount %s: not an emptyDir", str(m, "name"))
			}
			// An emptyDir is writable by any user of the pod.
			args = append(args, "--tmpfs", str(m, "mountPath")+":mode=1777,notmpcopyup")
		}
		args = append(args, q(str(c, "image")))
		for _, a := range list(c, "args") {
			args = append(args, q(fmt.Sprint(a)))
		}
		fmt.Fprintln(w, strings.Join(args, " "))
	}
	return nil
}
