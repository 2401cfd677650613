package inplace

import (
	"strings"
	"testing"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/sim/image"
	"github.com/upgradelab/upgradelab/sim/nic"
)

// shippedNIC loads the lab's images and NVMs: the drivers and firmware
// the planning is tested on are the ones the lab runs.
func shippedNIC(t *testing.T) (map[string]imagev1.Driver, nic.Catalog) {
	t.Helper()
	catalog, err := image.LoadCatalog("../../fixtures/images/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	drivers := map[string]imagev1.Driver{}
	for name, b := range catalog.Images {
		drivers[name] = b.I40e
	}
	nvms, err := nic.LoadCatalog("../../fixtures/nic/nvm-images.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return drivers, nvms
}

func TestPlanNICOrdersTheFlashSoTheNICStaysUp(t *testing.T) {
	drivers, nvms := shippedNIC(t)
	const (
		v135   = "ubuntu-24.04-k8s-v1.35.3"                  // i40e 2.25.7, API 1.15, minimum 1.12
		v136   = "ubuntu-24.04-k8s-v1.36.3"                  // same driver
		v135n  = "ubuntu-24.04-k8s-v1.35.3-i40e-2.28"        // i40e 2.28.9, API 1.17, minimum 1.15
		v136n  = "ubuntu-24.04-k8s-v1.36.3-i40e-2.28"        // same driver
		v136pr = "ubuntu-24.04-k8s-v1.36.3-i40e-3.0-preview" // API 2.0
	)
	for _, tc := range []struct {
		name            string
		from, to        string
		fromNVM, toNVM  string
		imageChanges    bool
		want            nicOrder
		refusalMentions string
	}{
		{name: "new driver runs the old NVM, old driver warns on the new", from: v135, to: v136n, fromNVM: "x710-nvm-9.20", toNVM: "x710-nvm-9.50", imageChanges: true, want: nicAfter},
		{name: "new driver warns on the old NVM, old driver runs the new", from: v135, to: v135n, fromNVM: "x710-nvm-8.70", toNVM: "x710-nvm-9.20", imageChanges: true, want: nicFirst},
		{name: "both orders clean: image first", from: v135, to: v136, fromNVM: "x710-nvm-8.70", toNVM: "x710-nvm-9.20", imageChanges: true, want: nicAfter},
		{name: "only the NVM", from: v135, to: v135, fromNVM: "x710-nvm-9.20", toNVM: "x710-nvm-8.70", want: nicOnly},
		{name: "new API major: no order keeps the link", from: v135, to: v136pr, fromNVM: "x710-nvm-9.20", toNVM: "x710-nvm-10.0-next", imageChanges: true, refusalMentions: "no order keeps the NIC up"},
		{name: "the new driver stops on the wanted NVM", from: v135, to: v136n, fromNVM: "x710-nvm-9.20", toNVM: "x710-nvm-10.0-next", imageChanges: true, refusalMentions: "major newer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := planNIC(drivers[tc.from], drivers[tc.to], tc.imageChanges, nvms[tc.fromNVM].API, nvms[tc.toNVM].API)
			if tc.refusalMentions != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refusalMentions) {
					t.Fatalf("plan %+v, %v; want a refusal mentioning %q", plan, err, tc.refusalMentions)
				}
				return
			}
			if err != nil || plan.order != tc.want {
				t.Fatalf("plan %+v, %v; want %s", plan, err, tc.want)
			}
		})
	}
}

// The extension's idea of the i40e driver agrees with the lab's rule
// file on every driver and NVM the lab ships: link up or down, and a
// warning or not.
func TestDriverLinkAgreesWithTheLabsRules(t *testing.T) {
	drivers, nvms := shippedNIC(t)
	rules, err := nic.LoadRules("../../fixtures/nic/i40e-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for image, d := range drivers {
		for _, nvm := range nvms {
			up, note := driverLink(d, nvm.API)
			lab := rules.Evaluate(&nic.Port{Flash: nic.FlashIdle, Active: nvm}, d)
			if up != lab.Up || (note != "") != (lab.Level != "") {
				t.Errorf("%s on %s: extension says up=%v %q; the lab's rule %s says up=%v level %q", image, nvm.Name, up, note, lab.Rule, lab.Up, lab.Level)
			}
		}
	}
}

// inRecovery names the ports the agent reports on recovery firmware (the
// lab sets the field from the NIC's flash state: TestNICLinkFollowsTheBootedDriverAndFlashes).
func TestInRecoveryNamesThePortsOnRecoveryFirmware(t *testing.T) {
	links := []agentv1.PortLink{
		{Port: "eno1", Firmware: "9.20", Recovery: true, Message: "Firmware recovery mode detected. Limiting functionality."},
		{Port: "eno2", Firmware: "9.50", Up: true},
		// A driver message alone is no recovery: the field is the contract.
		{Port: "eno3", Firmware: "9.50", Message: "recovery mode"},
	}
	if got := inRecovery(links); len(got) != 1 || got[0] != "eno1" {
		t.Fatalf("inRecovery = %v, want [eno1]", got)
	}
}
