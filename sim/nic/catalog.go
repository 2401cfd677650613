package nic

import (
	"fmt"
	"os"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/internal/specfile"
)

// Catalog is the NVM images the lab knows, by name.
type Catalog map[string]imagev1.NVMImage

// ParseCatalog reads fixtures/nic/nvm-images.yaml content; name is used in
// errors.
func ParseCatalog(name string, data []byte) (Catalog, error) {
	var file struct {
		Images []imagev1.NVMImage `yaml:"images"`
	}
	if err := specfile.Decode(name, data, &file); err != nil {
		return nil, err
	}
	c := Catalog{}
	for i, img := range file.Images {
		at := fmt.Sprintf("%s: images[%d]", name, i)
		switch {
		case img.Name == "":
			return nil, fmt.Errorf("%s.name: required", at)
		case c[img.Name].Name != "":
			return nil, fmt.Errorf("%s (%s).name: duplicate", at, img.Name)
		case img.Firmware == "":
			return nil, fmt.Errorf("%s (%s).firmware: required", at, img.Name)
		case img.API.Major < 1 || img.API.Minor < 0:
			return nil, fmt.Errorf("%s (%s).api: %s is not an admin-queue API version", at, img.Name, img.API)
		case img.FlashSeconds < 0:
			return nil, fmt.Errorf("%s (%s).flashSeconds: must not be negative", at, img.Name)
		}
		c[img.Name] = img
	}
	return c, nil
}

// LoadCatalog reads an NVM image catalog file.
func LoadCatalog(path string) (Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseCatalog(path, data)
}
