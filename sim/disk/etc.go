package disk

import (
	"maps"
	"strings"
)

// ImageEtc is the /etc an image ships (OSTree keeps it in /usr/etc): its
// os-release, which names the image, and a configuration file every image
// carries with the image's own value. A slot written with the image, and a
// deployment staged from it, start from this.
func ImageEtc(image string) map[string]string {
	return map[string]string{
		"/etc/os-release":         "PRETTY_NAME=\"" + image + "\"\n",
		"/etc/upgradelab/release": image + "\n",
	}
}

func etcPath(p string) bool {
	return strings.HasPrefix(p, "/etc/") && len(p) > len("/etc/") && !strings.Contains(p, "/../") && !strings.HasSuffix(p, "/..")
}

// mergeEtc is OSTree's three-way /etc merge at finalisation: base is the
// old image's /etc, current the running deployment's (the admin's edits
// on top of base), next the new image's. A file the admin added, changed
// or deleted keeps the admin's version; every other file is the new
// image's.
func mergeEtc(base, current, next map[string]string) map[string]string {
	out := maps.Clone(next)
	if out == nil {
		out = map[string]string{}
	}
	paths := map[string]bool{}
	for p := range base {
		paths[p] = true
	}
	for p := range current {
		paths[p] = true
	}
	for p := range paths {
		b, inBase := base[p]
		c, inCurrent := current[p]
		if inBase == inCurrent && b == c {
			continue // untouched by the admin: the new image's
		}
		if inCurrent {
			out[p] = c
		} else {
			delete(out, p)
		}
	}
	return out
}
