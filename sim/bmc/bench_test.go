package bmc

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// BenchmarkBMCRequests measures authenticated GETs of the ComputerSystem
// against one BMC over HTTPS with keep-alive connections.
func BenchmarkBMCRequests(b *testing.B) {
	f := newFixture(b, 0)
	client := f.httpClient()
	url := f.bmc.SystemURL()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("GET", url, nil)
			req.SetBasicAuth("admin", "upgradelab-bmc")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkFleet100BMCs starts a BMC for each host of a 100-host lab,
// with both protocols (the lab file's default), and waits until every one
// answers its ComputerSystem over HTTPS and a Get Channel Authentication
// Capabilities over IPMI.
func BenchmarkFleet100BMCs(b *testing.B) {
	base, err := lab.Load("../../fixtures/labs/single-node.yaml")
	if err != nil {
		b.Fatal(err)
	}
	def, err := base.Scaled(100)
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for range b.N {
		l, err := lab.Up(context.Background(), def, lab.Options{StateDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		begin := time.Now()
		fleet, err := StartFleet(l, nil)
		if err != nil {
			b.Fatal(err)
		}
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // timing only; trust is tested elsewhere
		var wg sync.WaitGroup
		bErr := func(host string, err error) { b.Errorf("%s: %v", host, err) }
		if len(fleet.IPMI) != 100 || len(fleet.BMCs) != 100 {
			b.Fatalf("%d Redfish and %d IPMI BMCs, want 100 each", len(fleet.BMCs), len(fleet.IPMI))
		}
		for _, bmc := range fleet.BMCs {
			wg.Go(func() {
				req, _ := http.NewRequest("GET", bmc.SystemURL(), nil)
				req.SetBasicAuth("admin", "upgradelab-bmc")
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != 200 {
					b.Errorf("%s: %v", bmc.SystemURL(), err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		for name, b := range fleet.IPMI {
			wg.Go(func() {
				if err := ipmiAnswers(b.Addr(), 5*time.Second); err != nil {
					bErr(name, err)
				}
			})
		}
		wg.Wait()
		total += time.Since(begin)
		fleet.Close()
		l.Down()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-100-answering/op")
}

// ipmiAnswers sends the first datagram ipmitool sends (Get Channel
// Authentication Capabilities, IPMI v1.5 session-less) and reads the
// answer.
func ipmiAnswers(addr string, timeout time.Duration) error {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	body := []byte{0x81, 0x00, 0x38, 0x8E, 0x04}
	var sum byte
	for _, x := range body {
		sum += x
	}
	msg := append([]byte{0x20, 0x18, 0xC8}, append(body, -sum)...)
	pkt := append([]byte{0x06, 0, 0xFF, 0x07, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(len(msg))}, msg...)
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(pkt); err != nil {
		return err
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if n < 21 || buf[20] != 0x00 {
		return fmt.Errorf("answer % x", buf[:n])
	}
	return nil
}
