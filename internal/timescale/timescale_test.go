package timescale

import (
	"context"
	"testing"
	"time"
)

func TestParseAndScale(t *testing.T) {
	for in, want := range map[string]Scale{"1": 1, "0.01": 0.01, "0": 0} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "fast", "-1"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if got := Scale(0.01).Real(time.Minute); got != 600*time.Millisecond {
		t.Fatalf("a modelled minute at 0.01 = %s, want 600ms", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Scale(1).Sleep(ctx, time.Hour); err == nil {
		t.Fatal("Sleep ignored a cancelled context")
	}
}
