package bmo

import (
	"strings"
	"testing"
)

// An Ironic below BMO's API floor is refused with what to install; one at
// or above it is taken.
func TestCheckIronicRefusesAnIronicBelowBMOsFloor(t *testing.T) {
	for api, ok := range map[string]bool{"1.82": true, "1.81": true, "1.95": true, "2.0": true, "1.80": false, "1.9": false, "": false, "x.y": false} {
		err := CheckIronic("20.1.0", api)
		if (err == nil) != ok {
			t.Errorf("API %q: %v", api, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "needs 1.81") || !strings.Contains(err.Error(), "install-deps.sh metal3")) {
			t.Errorf("API %q: %v; want the floor and the fix", api, err)
		}
	}
}
