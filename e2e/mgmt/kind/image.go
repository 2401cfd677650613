package kind

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	nodeutils "sigs.k8s.io/kind/pkg/cluster/nodeutils"
)

// BinaryImage writes the one-layer image of a manager's binary as a
// docker archive (what `docker save` writes and containerd imports) into
// cacheDir, once per content, and returns its name and path.
func BinaryImage(binary, name, cacheDir string) (image, path string, err error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return "", "", fmt.Errorf("manager %s image: %w", name, err)
	}
	if err := checkStatic(binary); err != nil {
		return "", "", fmt.Errorf("manager %s image: %w", name, err)
	}
	sum := sha256.Sum256(data)
	tag := hex.EncodeToString(sum[:])[:12]
	image = "upgradelab.local/" + filepath.Base(binary) + ":" + tag
	path = filepath.Join(cacheDir, filepath.Base(binary)+"-"+tag+".tar")
	if _, err := os.Stat(path); err == nil {
		return image, path, nil
	}
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	for _, h := range []*tar.Header{
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777},
		{Name: "manager", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data))},
	} {
		if err := lw.WriteHeader(h); err != nil {
			return "", "", err
		}
	}
	if _, err := lw.Write(data); err != nil {
		return "", "", err
	}
	if err := lw.Close(); err != nil {
		return "", "", err
	}
	diff := sha256.Sum256(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": []string{"/manager"}, "Env": []string{"PATH=/"}, "WorkingDir": "/"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diff[:])}},
	})
	if err != nil {
		return "", "", err
	}
	manifest, err := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": []string{image}, "Layers": []string{"layer.tar"}}})
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", "", err
	}
	f, err := os.CreateTemp(cacheDir, ".image-*")
	if err != nil {
		return "", "", err
	}
	defer os.Remove(f.Name())
	w := tar.NewWriter(f)
	for _, file := range []struct {
		name string
		data []byte
	}{{"config.json", config}, {"layer.tar", layer.Bytes()}, {"manifest.json", manifest}} {
		if err := w.WriteHeader(&tar.Header{Name: file.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(file.data))}); err != nil {
			return "", "", err
		}
		if _, err := w.Write(file.data); err != nil {
			return "", "", err
		}
	}
	if err := errors.Join(w.Close(), f.Close()); err != nil {
		return "", "", err
	}
	return image, path, os.Rename(f.Name(), path)
}

// checkStatic fails for a dynamically linked binary, which an image that
// holds nothing else could not run.
func checkStatic(binary string) error {
	f, err := elf.Open(binary)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; a manager's image holds only its binary, so build it with CGO_ENABLED=0", binary)
		}
	}
	return nil
}

// LoadImage puts an image archive into the node's containerd unless it is
// there already (the tag is the content's hash).
func (k *Cluster) LoadImage(image, path string) error {
	if out, err := k.Run("ctr", "--namespace=k8s.io", "images", "ls", "-q", "name=="+image); err == nil && strings.TrimSpace(out) != "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := nodeutils.LoadImageArchive(k.node, f); err != nil {
		return fmt.Errorf("loading %s into node %s: %w", image, k.node, err)
	}
	return nil
}
