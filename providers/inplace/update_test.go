package inplace

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/providers/baremetal/hostagent"
	"github.com/upgradelab/upgradelab/sim/agent"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// A write is tried again only when it was cut off: the host restarted
// under it or the agent never answered. What the agent refused (a bad
// checksum, a full disk) fails the update.
func TestCutShortTellsACutWriteFromARefusedOne(t *testing.T) {
	start := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	before := agent.Status{OS: &lab.RunningOS{BootedAt: start.Add(-time.Hour)}}
	after := agent.Status{OS: &lab.RunningOS{BootedAt: start.Add(time.Second)}}
	refused := &hostagent.Error{Call: "POST /v1/stage", Status: 500, Message: "sha256 mismatch"}
	dropped := fmt.Errorf("host agent POST /v1/stage: %w", errors.Join(errors.New("read: connection reset by peer"), syscall.ECONNRESET))
	for _, tc := range []struct {
		name string
		err  error
		st   agent.Status
		want bool
	}{
		{"refused by the agent, same boot", refused, before, false},
		{"refused, but the host restarted under it", fmt.Errorf("wrapped: %w", refused), after, true},
		{"the connection dropped", dropped, before, true},
	} {
		if got := cutShort(&staging{started: start, err: tc.err}, tc.st); got != tc.want {
			t.Errorf("%s: cutShort = %v, want %v", tc.name, got, tc.want)
		}
	}
}
