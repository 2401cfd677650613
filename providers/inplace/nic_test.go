package inplace

import (
	"strings"
	"testing"

	"github.com/upgradelab/upgradelab/sim/image"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/nic"
)

// shippedNIC loads the lab's images and NVMs: the drivers and firmware
// the planning is tested on are the ones the lab runs.
func shippedNIC(t *testing.T) (map[string]nic.Driver, nic.Catalog) {
	t.Helper()
	catalog, err := image.LoadCatalog("../../fixtures/images/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	drivers := map[string]nic.Driver{}
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

// The lab's driver rules, for a port whose flash was cut, log what the
// extension looks for to flash it again.
func TestInRecoveryFindsACutFlash(t *testing.T) {
	rules, err := nic.LoadRules("../../fixtures/nic/i40e-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := nic.LoadCatalog("../../fixtures/nic/nvm-images.yaml")
	if err != nil {
		t.Fatal(err)
	}
	driver := nic.Driver{Version: "2.28.9", API: nic.APIVersion{Major: 1, Minor: 17}, MinAPIMinor: 15}
	cut := &nic.Port{Name: "eno1", Active: cat["x710-nvm-9.20"]}
	if err := cut.BeginFlash(cat["x710-nvm-9.50"]); err != nil {
		t.Fatal(err)
	}
	cut.PowerLoss()
	fine := &nic.Port{Name: "eno2", Active: cat["x710-nvm-9.50"]}
	links := []lab.PortLink{
		{Port: "eno1", Firmware: cut.Active.Firmware, Link: rules.Evaluate(cut, driver)},
		{Port: "eno2", Firmware: fine.Active.Firmware, Link: rules.Evaluate(fine, driver)},
	}
	if got := inRecovery(links); len(got) != 1 || got[0] != "eno1" {
		t.Fatalf("inRecovery = %v, want [eno1] (links %+v)", got, links)
	}
}
