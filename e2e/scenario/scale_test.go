package scenario

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/internal/timescale"
)

// Every duration a scenario sets is lab time: at two time scales, each
// converted value is that lab time at the scale, so a run at either sees
// the same world. The walk finds every Duration in the Scenario, so a
// field added without a conversion fails here. CAPI's whole-second
// timeouts may round up, by less than a second.
func TestEveryDurationIsLabTimeAtAnyScale(t *testing.T) {
	paths, _ := filepath.Glob("../../scenarios/*.yaml")
	faults, _ := filepath.Glob("../../scenarios/faults/*.yaml")
	paths = append(paths, faults...)
	if len(paths) < 10 {
		t.Fatalf("found %d scenario files; want the repository's", len(paths))
	}
	seen := map[string]bool{}
	for _, path := range paths {
		s, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, scale := range []timescale.Scale{0.01, 0.1} {
			w := s.AtScale(scale)
			walkDurations(t, reflect.ValueOf(s).Elem(), reflect.ValueOf(w).Elem(), "", func(field string, lab, wall time.Duration) {
				seen[field] = true
				want := scale.Real(lab)
				switch field {
				case "Timeout":
					want = lab // the harness's budget, wall time
				case "Faults.SlowShutdown.Takes":
					want = lab // the lab's model takes lab time and scales it
				case "Cluster.HealthCheck.UnhealthyAfter", "Workload.NodeDrainTimeout":
					if wall >= max(want, time.Second) && wall-want < time.Second && wall%time.Second == 0 {
						return
					}
				}
				if wall != want {
					t.Errorf("%s at scale %g: %s is %s; want %s, its lab time %s at the scale", filepath.Base(path), scale, field, wall, want, lab)
				}
			})
		}
	}
	for _, field := range []string{"Cluster.HealthCheck.UnhealthyAfter", "Workload.NodeDrainTimeout", "Expect.StallFor", "Faults.When.Delay", "Faults.BMC.Latency", "Faults.BMC.Offline", "Faults.PowerLoss.RestoreAfter", "Faults.AgentCrash.RestartAfter", "Faults.SlowShutdown.Takes", "Faults.DownFor", "Faults.PauseCluster.For", "Expect.MaxAPIOutage"} {
		if !seen[field] {
			t.Errorf("no scenario sets %s: the walk never compared it", field)
		}
	}
}

// A single-node scenario's default API outage is DefaultSingleNodeOutage
// of lab time at any scale; three replicas allow none.
func TestTheDefaultAPIOutageIsLabTime(t *testing.T) {
	s, err := Read("../../scenarios/single-node-in-place.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, scale := range []timescale.Scale{0.01, 0.1} {
		if got, want := s.AtScale(scale).APIOutageBound(), scale.Real(DefaultSingleNodeOutage); got != want {
			t.Errorf("single node at scale %g: allowed outage %s; want %s", scale, got, want)
		}
	}
	three, err := Read("../../scenarios/three-node-scale-in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := three.AtScale(0.01).APIOutageBound(), timescale.Scale(0.01).Real(DefaultHAOutage); got != want {
		t.Errorf("three replicas: allowed outage %s; want a VIP failover's, %s", got, want)
	}
}

// walkDurations calls f with each Duration the two values (the same
// type) hold at the same place, by field path; slices and pointers are
// followed.
func walkDurations(t *testing.T, lab, wall reflect.Value, path string, f func(string, time.Duration, time.Duration)) {
	t.Helper()
	if lab.Type() == reflect.TypeOf(Duration{}) {
		f(path, lab.Interface().(Duration).Duration, wall.Interface().(Duration).Duration)
		return
	}
	switch lab.Kind() {
	case reflect.Pointer:
		if !lab.IsNil() && !wall.IsNil() {
			walkDurations(t, lab.Elem(), wall.Elem(), path, f)
		} else if lab.IsNil() != wall.IsNil() && lab.Type().Elem() != reflect.TypeOf(Duration{}) {
			t.Errorf("%s: set on one side only", path)
		}
	case reflect.Slice:
		if lab.Len() != wall.Len() {
			t.Errorf("%s: %d items, then %d", path, lab.Len(), wall.Len())
			return
		}
		for i := range lab.Len() {
			walkDurations(t, lab.Index(i), wall.Index(i), path, f)
		}
	case reflect.Struct:
		for i := range lab.NumField() {
			if !lab.Type().Field(i).IsExported() {
				continue
			}
			name := lab.Type().Field(i).Name
			if path != "" {
				name = path + "." + name
			}
			walkDurations(t, lab.Field(i), wall.Field(i), name, f)
		}
	}
}
