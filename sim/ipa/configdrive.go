package ipa

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"

	"github.com/upgradelab/upgradelab/sim/iso9660"
)

// Where an OpenStack config drive keeps what the OS reads.
const (
	configDriveUserData = "openstack/latest/user_data"
	configDriveMetaData = "openstack/latest/meta_data.json"
)

// maxConfigDrive bounds the decompressed config drive.
const maxConfigDrive = 64 << 20

// readConfigDrive reads the user data and meta data of a config drive as
// Ironic hands it to the agent: a gzipped ISO 9660 image, base64-encoded.
// Meta data values that are not strings are kept as their JSON.
func readConfigDrive(encoded string) (userData []byte, metaData map[string]string, err error) {
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, nil, fmt.Errorf("config drive: not base64: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("config drive: not gzip: %w", err)
	}
	img, err := io.ReadAll(io.LimitReader(zr, maxConfigDrive))
	if err != nil {
		return nil, nil, fmt.Errorf("config drive: %w", err)
	}
	if userData, err = iso9660.ReadFile(img, configDriveUserData); err != nil {
		userData = nil // an OS without user data
	}
	meta, err := iso9660.ReadFile(img, configDriveMetaData)
	if err != nil {
		return nil, nil, fmt.Errorf("config drive: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(meta, &m); err != nil {
		return nil, nil, fmt.Errorf("config drive: %s: %w", configDriveMetaData, err)
	}
	metaData = map[string]string{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			metaData[k] = s
			continue
		}
		b, _ := json.Marshal(v)
		metaData[k] = string(b)
	}
	return userData, metaData, nil
}
