package monitor

import (
	"path/filepath"
	"testing"

	"github.com/upgradelab/upgradelab/e2e/timeline"
)

// One poll that sees a Machine gone and its replacement new records the
// removal first: the replay must not show both at once, which KCP's
// scale-in never allows (it creates the replacement after the deletion).
func TestOnePollRecordsRemovalsBeforeAdditions(t *testing.T) {
	tl, err := timeline.Create(filepath.Join(t.TempDir(), "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	r := &Recorder{Timeline: tl, last: map[string]map[string]map[string]string{}}
	r.diff(KindMachine, map[string]map[string]string{"sc-cp-b": {FieldVersion: "v1.35.3"}, "sc-cp-c": {FieldVersion: "v1.35.3"}})
	r.diff(KindMachine, map[string]map[string]string{"sc-cp-a": {FieldVersion: "v1.36.3"}, "sc-cp-c": {FieldVersion: "v1.35.3"}})
	entries := tl.Entries()
	if len(entries) != 4 {
		t.Fatalf("entries %+v", entries)
	}
	gone, added := entries[2], entries[3]
	if gone.Name != "sc-cp-b" || gone.New != nil || added.Name != "sc-cp-a" || added.Old != nil {
		t.Fatalf("second poll recorded %+v then %+v; want sc-cp-b gone, then sc-cp-a new", gone, added)
	}
}
