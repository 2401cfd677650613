package nic

import (
	"fmt"
	"os"
	"strings"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/internal/specfile"
)

// Rules say what a driver does with the NVM it finds: the first rule whose
// conditions all hold decides. They are read from fixtures/nic/*.yaml.
type Rules struct {
	Model string `json:"model" yaml:"model"`
	Rules []Rule `json:"rules" yaml:"rules"`
}

// Rule is one outcome.
type Rule struct {
	Name string `json:"name" yaml:"name"`
	When When   `json:"when" yaml:"when"`
	// Link is "up" or "down".
	Link    string `json:"link" yaml:"link"`
	Level   string `json:"level,omitempty" yaml:"level,omitempty"`
	Message string `json:"message,omitempty" yaml:"message,omitempty"`
}

// When compares the NVM with the driver; an empty field matches anything.
type When struct {
	// Flash matches the NIC's flash state (idle, recovery).
	Flash FlashState `json:"flash,omitempty" yaml:"flash,omitempty"`
	// APIMajor is newer, same or older: the NVM's major against the driver's.
	APIMajor string `json:"apiMajor,omitempty" yaml:"apiMajor,omitempty"`
	// APIMinor is newer, same, older or belowMinimum (older than the
	// driver's minimum), with equal majors.
	APIMinor string `json:"apiMinor,omitempty" yaml:"apiMinor,omitempty"`
}

var (
	majorRelations = []string{"newer", "same", "older"}
	minorRelations = []string{"newer", "same", "older", "belowMinimum"}
	links          = []string{"up", "down"}
	levels         = []string{"", "info", "warning", "error"}
)

// ParseRules reads and validates a rules file's content; name is used in
// errors.
func ParseRules(name string, data []byte) (*Rules, error) {
	r := &Rules{}
	if err := specfile.Decode(name, data, r); err != nil {
		return nil, err
	}
	if r.Model == "" {
		return nil, fmt.Errorf("%s: model: required", name)
	}
	if len(r.Rules) == 0 {
		return nil, fmt.Errorf("%s: rules: at least one rule is required", name)
	}
	seen := map[string]bool{}
	for i, rule := range r.Rules {
		at := fmt.Sprintf("%s: rules[%d]", name, i)
		if rule.Name == "" {
			return nil, fmt.Errorf("%s.name: required", at)
		}
		at = fmt.Sprintf("%s (%s)", at, rule.Name)
		if seen[rule.Name] {
			return nil, fmt.Errorf("%s.name: duplicate", at)
		}
		seen[rule.Name] = true
		if err := oneOf(rule.Link, links); err != nil {
			return nil, fmt.Errorf("%s.link: %w", at, err)
		}
		if err := oneOf(rule.Level, levels); err != nil {
			return nil, fmt.Errorf("%s.level: %w", at, err)
		}
		if rule.When.APIMajor != "" {
			if err := oneOf(rule.When.APIMajor, majorRelations); err != nil {
				return nil, fmt.Errorf("%s.when.apiMajor: %w", at, err)
			}
		}
		if rule.When.APIMinor != "" {
			if err := oneOf(rule.When.APIMinor, minorRelations); err != nil {
				return nil, fmt.Errorf("%s.when.apiMinor: %w", at, err)
			}
		}
		if f := rule.When.Flash; f != "" && f != FlashIdle && f != FlashRecovery {
			return nil, fmt.Errorf("%s.when.flash: %q is not idle or recovery", at, f)
		}
	}
	last := r.Rules[len(r.Rules)-1].When
	if last != (When{}) {
		return nil, fmt.Errorf("%s: rules: the last rule must have an empty when, so every pairing has an outcome", name)
	}
	return r, nil
}

// LoadRules reads a rules file.
func LoadRules(path string) (*Rules, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseRules(path, data)
}

func oneOf(v string, allowed []string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("%q is not one of %s", v, strings.Join(allowed, ", "))
}

// Evaluate decides the link of port p under driver d.
func (r *Rules) Evaluate(p *Port, d imagev1.Driver) Link {
	flash := p.Flash
	if flash == FlashWriting {
		flash = FlashIdle // the running firmware serves while it flashes
	}
	major, minor := relations(p.Active.API, d)
	for _, rule := range r.Rules {
		w := rule.When
		if (w.Flash != "" && w.Flash != flash) ||
			(w.APIMajor != "" && w.APIMajor != major) ||
			(w.APIMinor != "" && w.APIMinor != minor) {
			continue
		}
		return Link{Up: rule.Link == "up", Rule: rule.Name, Level: rule.Level, Message: expand(rule.Message, p, d)}
	}
	// ParseRules guarantees a catch-all; reaching here means Rules was built by hand.
	return Link{Up: false, Rule: "no-rule", Level: "error", Message: "no rule matched"}
}

func relations(nvm imagev1.APIVersion, d imagev1.Driver) (major, minor string) {
	switch {
	case nvm.Major > d.API.Major:
		return "newer", ""
	case nvm.Major < d.API.Major:
		return "older", ""
	}
	switch {
	case nvm.Minor > d.API.Minor:
		return "same", "newer"
	case nvm.Minor == d.API.Minor:
		return "same", "same"
	case nvm.Minor < d.MinAPIMinor:
		return "same", "belowMinimum"
	default:
		return "same", "older"
	}
}

// expand fills {nvm}, {driver}, {firmware} and {driverVersion}.
func expand(msg string, p *Port, d imagev1.Driver) string {
	return strings.NewReplacer(
		"{nvm}", "v"+p.Active.API.String(),
		"{driver}", "v"+d.API.String(),
		"{firmware}", p.Active.Firmware,
		"{driverVersion}", d.Version,
	).Replace(msg)
}
