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
