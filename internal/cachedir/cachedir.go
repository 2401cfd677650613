// Package cachedir is where upgradelab keeps what it builds or fetches
// once, outside any checkout: kube binaries, CAPI's managers, the VM
// kernel package. UPGRADELAB_CACHE overrides it.
package cachedir

import (
	"os"
	"path/filepath"
)

// Dir is the cache folder.
func Dir() string {
	if dir := os.Getenv("UPGRADELAB_CACHE"); dir != "" {
		return dir
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "upgradelab-cache")
	}
	return filepath.Join(home, ".cache", "upgradelab")
}
