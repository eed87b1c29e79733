package environment

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// maxChanges bounds the packages a change notice names one by one.
const maxChanges = 8

// Change says, in one clause, what differs between the environment a
// checkpoint was made in (from, its ID) and the one it is restored into
// (to): the Python version and the Python distributions added, removed
// or of another version. lookup finds a manifest by ID (Store.Manifest);
// an ID it does not know is named, and what changed is then unknown.
// Equal IDs, or a checkpoint that recorded none, give "".
func Change(from, to string, lookup func(id string) (*Manifest, error)) string {
	if from == "" || from == to {
		return ""
	}
	head := fmt.Sprintf("the checkpoint was made in environment %s and is restored into %s", describeID(from, lookup), describeID(to, lookup))
	if from == Host || to == Host {
		return head + ": imported modules may be missing or of other versions"
	}
	a, errA := lookup(from)
	b, errB := lookup(to)
	if errA != nil || errB != nil {
		return head + " (this machine does not have the first one's manifest, so what changed is not known)"
	}
	var parts []string
	if a.Python != b.Python {
		parts = append(parts, "Python "+a.Python+" → "+b.Python)
	}
	var changed []string
	for _, name := range slices.Sorted(maps.Keys(b.Dists)) {
		va, ok := a.Dists[name]
		switch {
		case !ok:
			changed = append(changed, "+"+name+" "+b.Dists[name])
		case va != b.Dists[name]:
			changed = append(changed, name+" "+va+" → "+b.Dists[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(a.Dists)) {
		if _, ok := b.Dists[name]; !ok {
			changed = append(changed, "−"+name+" "+a.Dists[name])
		}
	}
	if len(changed) > maxChanges {
		changed = append(changed[:maxChanges], fmt.Sprintf("and %d more", len(changed)-maxChanges))
	}
	parts = append(parts, changed...)
	if len(parts) == 0 {
		return head + ": the same Python packages (only Debian packages differ)"
	}
	return head + ": " + strings.Join(parts, ", ")
}

// describeID names an environment by its ID, with the name it was built
// under when its manifest is known.
func describeID(id string, lookup func(string) (*Manifest, error)) string {
	if id == Host {
		return "host (the host's /usr)"
	}
	if m, err := lookup(id); err == nil && m.Name != "" {
		return m.Name + " (" + id + ")"
	}
	return id
}
