package plan

import (
	"fmt"
	"strings"

	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// Load reads a scenario file and checks it against its lab (Fits): the
// lab file loads, the images are in its catalog and carry the versions,
// the NIC firmware is in its NVM catalog, and the lab has hosts enough.
func Load(path string) (*scenario.Scenario, *lab.Definition, error) {
	s, err := scenario.Read(path)
	if err != nil {
		return nil, nil, err
	}
	def, err := lab.Load(s.LabPath())
	if err != nil {
		return nil, nil, fmt.Errorf("%s: lab: %w", path, err)
	}
	if err := Fits(s, def); err != nil {
		return nil, nil, err
	}
	return s, def, nil
}

// Fits checks a scenario against a lab: the images are in its catalog
// and carry the versions, the NIC firmware is in its NVM catalog, and
// the lab has hosts enough. The error names the scenario's file.
func Fits(s *scenario.Scenario, def *lab.Definition) error {
	path := s.Path()
	var errs []string
	for _, r := range []struct {
		field string
		rel   scenario.Release
	}{{"from", s.From}, {"to", s.To}} {
		img, err := def.Catalog.Get(r.rel.Image)
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("%s.image: %v", r.field, err))
		case img.KubernetesVersion != r.rel.Version:
			errs = append(errs, fmt.Sprintf("%s.image: %s carries Kubernetes %s, not %s", r.field, img.Name, img.KubernetesVersion, r.rel.Version))
		}
	}
	if fw := s.To.NICFirmware; fw != "" {
		if _, ok := def.NVMImages[fw]; !ok {
			errs = append(errs, fmt.Sprintf("to.nicFirmware: %q is not in the lab's NVM catalog", fw))
		}
	}
	if need, have := s.HostsNeeded(), len(def.Spec.Hosts); need > have {
		errs = append(errs, fmt.Sprintf("cluster: needs %d hosts during the upgrade, lab %s has %d", need, def.Spec.Name, have))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %s", path, strings.Join(errs, "; "))
	}
	return nil
}

// WithCluster is a copy of s with another cluster shape
// (scenario.Scenario.WithCluster) that def has hosts enough for.
func WithCluster(s *scenario.Scenario, c scenario.Cluster, def *lab.Definition) (*scenario.Scenario, error) {
	out, err := s.WithCluster(c)
	if err != nil {
		return nil, err
	}
	if need, have := out.HostsNeeded(), len(def.Spec.Hosts); need > have {
		return nil, fmt.Errorf("cluster: needs %d hosts during the upgrade, lab %s has %d", need, def.Spec.Name, have)
	}
	return out, nil
}
