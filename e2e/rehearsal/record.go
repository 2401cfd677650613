package rehearsal

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/upgradelab/upgradelab/e2e/result"
)

// A rehearsal's folder holds RecordFile (what ran), PlanCopy (the plan
// as it was), a folder per wave (a fleet's artifacts) and the
// prediction.
const (
	RecordFile = "rehearsal.json"
	PlanCopy   = "plan.yaml"
)

// Record is what a rehearsal ran, for `rehearse report` to predict from
// again without running anything.
type Record struct {
	// Plan is the plan file's path when it ran.
	Plan          string         `json:"plan"`
	Site          string         `json:"site"`
	Waves         []Wave         `json:"waves"`
	FailurePoints []FailurePoint `json:"failurePoints"`
	// LeftOut are the export's clusters the wave does not hold, each
	// with the reason (Site.LeftOut).
	LeftOut []Unmapped `json:"leftOut,omitempty"`
}

// Write writes the record and a copy of the plan into dir.
func (r *Record) Write(dir string) error {
	plan, err := os.ReadFile(r.Plan)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, PlanCopy), plan, 0o644); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, RecordFile), append(b, '\n'), 0o644)
}

// ReadRecord reads a rehearsal's folder: its record, its plan and each
// wave's results.
func ReadRecord(dir string) (*Record, *Plan, error) {
	b, err := os.ReadFile(filepath.Join(dir, RecordFile))
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not a rehearsal's folder: %w", dir, err)
	}
	r := &Record{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, RecordFile), err)
	}
	data, err := os.ReadFile(filepath.Join(dir, PlanCopy))
	if err != nil {
		return nil, nil, err
	}
	p, err := ParsePlan(r.Plan, data)
	if err != nil {
		return nil, nil, err
	}
	for i := range r.Waves {
		w := &r.Waves[i]
		w.Dir = filepath.Join(dir, w.Name)
		if w.Results, err = result.Read(filepath.Join(w.Dir, result.File)); err != nil {
			return nil, nil, fmt.Errorf("wave %s: %w", w.Name, err)
		}
	}
	return r, p, nil
}
