package kind

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// staticBinary builds a tiny static program for the image tests.
func staticBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module tiny\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", "tiny", ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "tiny")
}

// The image is a docker archive containerd imports: a manifest naming the
// tag, a config whose diff ID is the layer's hash, and a layer with the
// binary as /manager.
func TestBinaryImageIsADockerArchiveOfTheBinary(t *testing.T) {
	bin := staticBinary(t)
	cache := t.TempDir()
	image, path, err := BinaryImage(bin, "capi", cache)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(image, "upgradelab.local/tiny:") {
		t.Errorf("image %q", image)
	}
	files := map[string][]byte{}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := tar.NewReader(f)
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		files[h.Name] = b
	}
	var manifest []struct{ Config, RepoTags, Layers any }
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	if !strings.Contains(string(files["manifest.json"]), image) {
		t.Errorf("manifest does not tag %s: %s", image, files["manifest.json"])
	}
	layer := tar.NewReader(strings.NewReader(string(files["layer.tar"])))
	var names []string
	for {
		h, err := layer.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
		if h.Name == "manager" && h.Mode&0o111 == 0 {
			t.Errorf("/manager is not executable: %o", h.Mode)
		}
	}
	if !slices.Contains(names, "manager") {
		t.Errorf("layer holds %v, no manager", names)
	}
	if !strings.Contains(string(files["config.json"]), `"Entrypoint":["/manager"]`) {
		t.Errorf("config: %s", files["config.json"])
	}
	// Same content, same archive: the second call builds nothing.
	again, path2, err := BinaryImage(bin, "capi", cache)
	if err != nil || again != image || path2 != path {
		t.Errorf("second call: %s %s %v", again, path2, err)
	}
}

func TestBinaryImageRefusesADynamicBinary(t *testing.T) {
	_, _, err := BinaryImage("/bin/true", "capi", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") || !strings.Contains(err.Error(), "manager capi") {
		t.Fatalf("error = %v, want it to name the manager and CGO_ENABLED=0", err)
	}
}
