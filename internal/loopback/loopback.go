// Package loopback hands out loopback ports for listeners that bind them
// later or bind them again: a manager the plane starts, a provider's
// callback endpoint, a BMC or agent that goes offline and comes back, a
// workload cluster's API server.
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
)

// Ports come from below Linux's ephemeral range (32768 up by default). A
// port from that range, free while its listener is not bound, can
// meanwhile become the source port of any outgoing connection; four
// scenarios starting at once open hundreds, and one did take a
// provider's health port, another a workload cluster's, that way. Below
// the range only another explicit bind can take it.
const (
	firstPort = 20000
	portSpan  = 12000
)

// handedOut are the ports this process has given out: two planes of one
// suite never get the same one, even before its child has bound it. Ports
// are a machine-wide resource, hence process-wide state.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Ports picks n distinct loopback ports that are free now and that this
// process has not handed out before.
func Ports(n int) ([]int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			return nil, fmt.Errorf("no %d free loopback ports between %d and %d", n, firstPort, firstPort+portSpan-1)
		}
		port := firstPort + rand.IntN(portSpan)
		if handedOut.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		handedOut.ports[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// Addr is one such port as 127.0.0.1:PORT.
func Addr() (string, error) {
	ports, err := Ports(1)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0]), nil
}
