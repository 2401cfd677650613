package image

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/sim/nic"
)

const shipped = "../../fixtures/images/catalog.yaml"

func TestShippedCatalogChecksumsMatchPayloads(t *testing.T) {
	c, err := LoadCatalog(shipped)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range c.Names() {
		b := c.Images[name]
		if got := Checksum(Payload(b)); got != b.SHA256 {
			t.Errorf("%s: image %s: sha256 %s, but its payload hashes to %s", shipped, name, b.SHA256, got)
		}
	}
}

func TestPayloadCarriesItsManifest(t *testing.T) {
	c, _ := LoadCatalog(shipped)
	b, err := c.Get("ubuntu-24.04-k8s-v1.36.3")
	if err != nil {
		t.Fatal(err)
	}
	p := Payload(b)
	if len(p) != PayloadBytes {
		t.Fatalf("payload is %d bytes, want %d", len(p), PayloadBytes)
	}
	m, err := imagev1.ReadManifest(p)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != b.Name || m.KubernetesVersion != "v1.36.3" || m.I40e.APIMinor != 15 {
		t.Fatalf("manifest %+v does not describe %s", m, b.Name)
	}
	if _, err := imagev1.ReadManifest(make([]byte, 100)); !errors.Is(err, imagev1.ErrNotAnImage) {
		t.Fatalf("zeros read as an image: %v", err)
	}
	other, _ := c.Get("ubuntu-24.04-k8s-v1.35.3")
	if Checksum(Payload(other)) == Checksum(p) {
		t.Fatal("two images have the same payload")
	}
}

func TestServerRangeAndChecksumRefusal(t *testing.T) {
	c, _ := LoadCatalog(shipped)
	s, err := Serve(c, nil, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, _ := c.Get("ubuntu-24.04-k8s-v1.36.3")
	ctx := context.Background()

	data, err := Fetch(ctx, http.DefaultClient, s.ImageURL(b.Name), b.SHA256)
	if err != nil || Checksum(data) != b.SHA256 {
		t.Fatalf("Fetch with the right checksum: %v", err)
	}

	req, _ := http.NewRequest(http.MethodGet, s.ImageURL(b.Name), nil)
	req.Header.Set("Range", "bytes=10-19")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || string(part) != string(data[10:20]) {
		t.Fatalf("Range request: %s, %q; want 206 and bytes 10-19", resp.Status, part)
	}

	resp, err = http.Get(s.ImageURL(b.Name) + ".sha256")
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(sum), b.SHA256) {
		t.Fatalf(".sha256 = %q", sum)
	}

	wrong := strings.Repeat("0", 64)
	got, err := Fetch(ctx, http.DefaultClient, s.ImageURL(b.Name), wrong)
	if !errors.Is(err, ErrChecksum) || got != nil {
		t.Fatalf("Fetch with a wrong checksum returned %d bytes and %v; want nothing and ErrChecksum", len(got), err)
	}
	if !strings.Contains(err.Error(), b.SHA256) || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("the error should give both sums and say nothing was written: %v", err)
	}
	if _, err := Fetch(ctx, http.DefaultClient, s.ImageURL("no-such-image"), wrong); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("unknown image: %v", err)
	}
}

func TestCatalogValidationNamesFileImageAndField(t *testing.T) {
	good := "- name: os-1\n  role: os\n  kubernetesVersion: v1.35.0\n  etcd: 3.6.4-0\n  coreDNS: v1.12.1\n  i40e: {version: 2.25.7, api: {major: 1, minor: 15}, minApiMinor: 12}\n  sizeMiB: 10\n  sha256: " + strings.Repeat("a", 64) + "\n"
	tests := []struct{ yaml, want string }{
		{"images:\n" + good, ""},
		{"images:\n" + strings.Replace(good, "v1.35.0", "1.35", 1), `c.yaml: images[0] (os-1).kubernetesVersion: "1.35" is not a version`},
		{"images:\n" + strings.Replace(good, "sizeMiB: 10", "sizeMiB: 0", 1), "images[0] (os-1).sizeMiB: must be positive"},
		{"images:\n" + strings.Replace(good, strings.Repeat("a", 64), "abc", 1), `images[0] (os-1).sha256: "abc"`},
		{"images:\n" + strings.Replace(good, "role: os", "role: firmware", 1), `role: "firmware" is not os, deploy or recovery`},
		{"images:\n" + good + good, "images[1] (os-1).name: duplicate"},
		{"images:\n" + strings.Replace(good, "sizeMiB", "sizeMB", 1), `c.yaml: line 8: unknown field "sizeMB"`},
		{"images:\n" + strings.Replace(good, "3.6.4-0", "v3.6.4", 1), `images[0] (os-1).etcd: "v3.6.4" is not an etcd image tag`},
		{"images:\n" + strings.Replace(good, "  coreDNS: v1.12.1\n", "", 1), `images[0] (os-1).coreDNS: "" is not a CoreDNS image tag`},
		{"images: []\n", "the catalog is empty"},
	}
	for _, tt := range tests {
		_, err := ParseCatalog("c.yaml", []byte(tt.yaml))
		if tt.want == "" {
			if err != nil {
				t.Errorf("valid catalog refused: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error %v, want it to contain %q", err, tt.want)
		}
	}
}

func FuzzParseCatalog(f *testing.F) {
	f.Add([]byte("images:\n- name: os-1\n  role: os\n  kubernetesVersion: v1.35.0\n  etcd: 3.6.4-0\n  coreDNS: v1.12.1\n  i40e: {version: a, api: {major: 1, minor: 1}}\n  sizeMiB: 1\n  sha256: " + strings.Repeat("a", 64) + "\n"))
	f.Add([]byte("images: [{name: x}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCatalog("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, name := range c.Names() {
			if _, err := imagev1.ReadManifest(Payload(c.Images[name])); err != nil {
				t.Fatalf("a valid bundle's payload has no manifest: %v", err)
			}
		}
	})
}

func TestServerDescribesFirmwarePackages(t *testing.T) {
	c, _ := LoadCatalog(shipped)
	want := imagev1.NVMImage{Name: "x710-nvm-9.50", Firmware: "9.50", EETrack: "0x8000f25c", API: imagev1.APIVersion{Major: 1, Minor: 17}, FlashSeconds: 90}
	s, err := Serve(c, nic.Catalog{want.Name: want}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get(s.FirmwareURL(want.Name))
	if err != nil {
		t.Fatal(err)
	}
	var got imagev1.NVMImage
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || got != want {
		t.Fatalf("package of %s: %+v, %v; want %+v", want.Name, got, err, want)
	}
	resp, err = http.Get(s.FirmwareURL("x710-nvm-0.1"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "x710-nvm-0.1") {
		t.Fatalf("unknown package: %s %q; want 404 naming it", resp.Status, body)
	}
}
