package nic

import (
	"strings"
	"testing"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
)

func shippedRules(t *testing.T) *Rules {
	t.Helper()
	r, err := LoadRules("../../fixtures/nic/i40e-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestI40eRules(t *testing.T) {
	rules := shippedRules(t)
	driver := imagev1.Driver{Version: "2.25.7", API: imagev1.APIVersion{Major: 1, Minor: 15}, MinAPIMinor: 12}
	tests := []struct {
		name     string
		nvm      imagev1.APIVersion
		flash    FlashState
		wantUp   bool
		wantRule string
		wantMsg  string
	}{
		{"same version", imagev1.APIVersion{Major: 1, Minor: 15}, FlashIdle, true, "supported", ""},
		{"older minor above the minimum", imagev1.APIVersion{Major: 1, Minor: 13}, FlashIdle, true, "supported", ""},
		{"newer minor loads with a warning", imagev1.APIVersion{Major: 1, Minor: 17}, FlashIdle, true, "nvm-minor-newer",
			"newer version of the NVM image v1.17 than expected v1.15"},
		{"minor below the minimum asks for an NVM update", imagev1.APIVersion{Major: 1, Minor: 11}, FlashIdle, true, "nvm-minor-below-minimum",
			"older version of the NVM image v1.11 than expected v1.15. Please update the NVM image."},
		{"newer major: the port never comes up", imagev1.APIVersion{Major: 2, Minor: 0}, FlashIdle, false, "nvm-major-newer",
			"stopped because the NVM image v2.0 is newer than expected v1.15"},
		{"older major does not init", imagev1.APIVersion{Major: 0, Minor: 9}, FlashIdle, false, "nvm-major-older", "failed to init"},
		{"recovery mode wins over versions", imagev1.APIVersion{Major: 1, Minor: 15}, FlashRecovery, false, "recovery-mode", "Firmware recovery mode detected"},
		{"the running firmware serves during a flash", imagev1.APIVersion{Major: 1, Minor: 15}, FlashWriting, true, "supported", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Port{Name: "eno1", Flash: tt.flash, Active: imagev1.NVMImage{Name: "x", API: tt.nvm}}
			got := rules.Evaluate(p, driver)
			if got.Up != tt.wantUp || got.Rule != tt.wantRule || !strings.Contains(got.Message, tt.wantMsg) {
				t.Fatalf("Evaluate = %+v; want up=%v rule=%s message containing %q", got, tt.wantUp, tt.wantRule, tt.wantMsg)
			}
		})
	}
}

func TestFlashLifecycle(t *testing.T) {
	old := imagev1.NVMImage{Name: "x710-nvm-8.70", API: imagev1.APIVersion{Major: 1, Minor: 12}}
	next := imagev1.NVMImage{Name: "x710-nvm-9.20", API: imagev1.APIVersion{Major: 1, Minor: 15}}

	p := &Port{Name: "eno1", Flash: FlashIdle, Active: old}
	if err := p.BeginFlash(next); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginFlash(next); err == nil {
		t.Fatal("a second flash during a flash was accepted")
	}
	if err := p.FinishFlash(); err != nil {
		t.Fatal(err)
	}
	if p.Active.Name != old.Name || p.Pending == nil || p.Pending.Name != next.Name {
		t.Fatalf("after flash: active %s pending %v; want the old image active until reset", p.Active.Name, p.Pending)
	}
	p.Reset()
	if p.Active.Name != next.Name || p.Pending != nil {
		t.Fatalf("after reset: active %s pending %v; want the new image active", p.Active.Name, p.Pending)
	}

	cut := &Port{Name: "eno2", Flash: FlashIdle, Active: old}
	cut.BeginFlash(next)
	cut.PowerLoss()
	if cut.Flash != FlashRecovery {
		t.Fatalf("power loss during flash: flash state %s, want recovery", cut.Flash)
	}
	cut.Reset()
	if cut.Flash != FlashRecovery {
		t.Fatal("a reset must not leave recovery mode; only a full reflash does")
	}
	cut.BeginFlash(next)
	cut.FinishFlash()
	cut.Reset()
	if cut.Flash != FlashIdle || cut.Active.Name != next.Name {
		t.Fatalf("reflash from recovery: flash %s active %s; want idle and %s", cut.Flash, cut.Active.Name, next.Name)
	}
}

func TestRulesValidationNamesFileRuleAndField(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"model: i40e\nrules: []\n", "f.yaml: rules: at least one rule"},
		{"model: i40e\nrules:\n- name: a\n  link: sideways\n  when: {}\n", `f.yaml: rules[0] (a).link: "sideways" is not one of up, down`},
		{"model: i40e\nrules:\n- name: a\n  link: up\n  when: {apiMinor: bigger}\n- name: b\n  link: up\n", `rules[0] (a).when.apiMinor: "bigger"`},
		{"model: i40e\nrules:\n- name: a\n  link: up\n  when: {apiMajor: newer}\n", "the last rule must have an empty when"},
		{"model: i40e\nrules:\n- name: a\n  link: up\n  colour: red\n", `f.yaml: line 5: unknown field "colour"`},
	}
	for _, tt := range tests {
		_, err := ParseRules("f.yaml", []byte(tt.yaml))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseRules(%q) error %v, want it to contain %q", tt.yaml, err, tt.want)
		}
	}
}

func TestShippedNVMCatalog(t *testing.T) {
	c, err := LoadCatalog("../../fixtures/nic/nvm-images.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c["x710-nvm-9.20"].API != (imagev1.APIVersion{Major: 1, Minor: 15}) {
		t.Fatalf("x710-nvm-9.20 api = %v", c["x710-nvm-9.20"].API)
	}
}

func FuzzParseRules(f *testing.F) {
	f.Add([]byte("model: i40e\nrules:\n- name: a\n  link: up\n"))
	f.Add([]byte("model: i40e\nrules:\n- name: a\n  when: {apiMajor: newer}\n  link: down\n- name: b\n  link: up\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRules("fuzz.yaml", data)
		if err != nil {
			return
		}
		// A valid rule set decides every pairing.
		link := r.Evaluate(&Port{Active: imagev1.NVMImage{API: imagev1.APIVersion{Major: 1, Minor: 1}}}, imagev1.Driver{API: imagev1.APIVersion{Major: 1, Minor: 2}})
		if link.Rule == "no-rule" {
			t.Fatalf("valid rules %+v left a pairing undecided", r)
		}
	})
}
