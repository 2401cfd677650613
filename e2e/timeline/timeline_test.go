package timeline

import (
	"path/filepath"
	"testing"
	"time"
)

// What a run writes is what the checks would have judged in memory: an
// object with an empty summary is not read back as gone.
func TestFileRoundTripKeepsEmptySummariesApartFromDeletions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "timeline.jsonl")
	tl, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	tl.Add(Entry{Time: at, Kind: "Cluster", Name: "c", New: map[string]string{}})
	tl.Add(Entry{Time: at.Add(time.Second), Kind: "Machine", Name: "m", Old: map[string]string{"phase": "Running"}})
	tl.Step("upgrade", "v1.35.3 -> v1.36.3")
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil || len(got) != 3 {
		t.Fatalf("read %d entries, %v", len(got), err)
	}
	if got[0].New == nil || got[0].Old != nil {
		t.Fatalf("an object that appeared with an empty summary reads back as %+v", got[0])
	}
	if got[1].New != nil || got[1].Old["phase"] != "Running" {
		t.Fatalf("a deletion reads back as %+v", got[1])
	}
	if got[2].Kind != KindStep || got[2].New["detail"] != "v1.35.3 -> v1.36.3" || !got[0].Time.Equal(at) {
		t.Fatalf("entries %+v", got)
	}
}
