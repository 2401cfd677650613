package timescale

import (
	"context"
	"fmt"
	"time"
)

// Scale is real time per modelled time: 1 is real time, 0.01 runs a
// modelled minute in 0.6 s, 0 does not wait at all.
type Scale float64

// Suite is the scale a suite runs at unless told otherwise (make e2e,
// upgradelab run): a modelled minute in 0.6 s.
const Suite = Scale(0.01)

// Parse reads a scale from a flag or a file field.
func Parse(s string) (Scale, error) {
	var f float64
	if _, err := fmt.Sscanf(s, "%g", &f); err != nil || f < 0 {
		return 0, fmt.Errorf("time scale %q: want a number >= 0 (1 is real time, 0.01 is 100x faster)", s)
	}
	return Scale(f), nil
}

// Real is the real duration of a modelled one.
func (s Scale) Real(modelled time.Duration) time.Duration {
	return time.Duration(float64(modelled) * float64(s))
}

// Sleep waits the real time of a modelled duration, or until ctx ends.
func (s Scale) Sleep(ctx context.Context, modelled time.Duration) error {
	d := s.Real(modelled)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Seconds is a modelled duration given in seconds, as the fixtures write it.
func Seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
