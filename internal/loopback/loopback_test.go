package loopback

import (
	"sync"
	"testing"
)

// Scenarios starting at once each ask for their ports: every port is below
// the ephemeral range and none is handed out twice.
func TestPortsAreDistinctAndBelowTheEphemeralRange(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ports, err := Ports(15)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, p := range ports {
				if p < firstPort || p >= 32768 {
					t.Errorf("port %d is outside %d..32767", p, firstPort)
				}
				if seen[p] {
					t.Errorf("port %d handed out twice", p)
				}
				seen[p] = true
			}
		}()
	}
	wg.Wait()
	if len(seen) != 8*15 {
		t.Fatalf("%d distinct ports, want %d", len(seen), 8*15)
	}
}
