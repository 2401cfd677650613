//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"

	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/bmc"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// The lab's promise to everything above it: each host is reachable through
// a Redfish BMC that any client drives, and what the BMC does is what the
// hardware does.
var _ = Describe("simulated lab", Label("lab"), func() {
	It("boots every host of the cold-spare lab from virtual media through its BMC", func(ctx context.Context) {
		def, err := lab.Load("../fixtures/labs/cold-spare.yaml")
		Expect(err).NotTo(HaveOccurred())
		l, err := lab.Up(ctx, def, lab.Options{StateDir: filepath.Join(artifactsDir(), "lab-cold-spare"), Scale: timescale.Scale(*timeScaleFlag)})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(l.Down)
		fleet, err := bmc.StartFleet(l, nil)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(fleet.Close)
		events, cancel := l.Subscribe()
		DeferCleanup(cancel)

		info := l.Info()
		deploy := l.ImageServer().ImageURL("deploy-ramdisk-2026.10")
		for i, h := range info.Hosts {
			By(fmt.Sprintf("host %d/%d %s: insert deploy media, boot Once from Cd, power on through %s", i+1, len(info.Hosts), h.Name, h.BMC.Address))
			c := redfishClient(h.BMC)
			sys, err := redfish.GetComputerSystem(c, strings.TrimPrefix(h.BMC.Address, endpointOf(h.BMC.Address)))
			Expect(err).NotTo(HaveOccurred())
			managers, err := c.Service.Managers()
			Expect(err).NotTo(HaveOccurred())
			media, err := managers[0].VirtualMedia()
			Expect(err).NotTo(HaveOccurred())
			Expect(media[0].InsertMedia(deploy, true, true)).To(Succeed())
			Expect(sys.SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.CdBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled})).To(Succeed())
			Expect(sys.Reset(redfish.OnResetType)).To(Succeed())
			c.Logout()
		}

		By("waiting for every host to run the deploy image")
		running := map[string]string{}
		deadline := time.After(time.Minute)
		for len(running) < len(info.Hosts) {
			select {
			case e := <-events:
				if e.Reason == "OSRunning" {
					running[e.Host] = e.Data["source"] + " " + e.Data["image"]
					fmt.Fprintf(GinkgoWriter, "[lab] %d/%d hosts running: %s booted %s\n", len(running), len(info.Hosts), e.Host, running[e.Host])
				}
			case <-deadline:
				Fail(fmt.Sprintf("after a minute only %d/%d hosts run an OS: %v", len(running), len(info.Hosts), running))
			}
		}
		for host, what := range running {
			Expect(what).To(Equal(string(lab.FromVirtualMedia)+" deploy-ramdisk-2026.10"), "host %s", host)
		}
	}, SpecTimeout(3*time.Minute))
})

func endpointOf(systemURL string) string { return strings.SplitN(systemURL, "/redfish", 2)[0] }

// redfishClient logs in to a BMC as lab.json describes it, trusting only
// the lab's CA.
func redfishClient(b *lab.BMCInfo) *gofish.APIClient {
	caPEM, err := os.ReadFile(b.CAFile)
	Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(caPEM)).To(BeTrue())
	c, err := gofish.Connect(gofish.ClientConfig{
		Endpoint: endpointOf(b.Address), Username: b.Username, Password: b.Password,
		HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 30 * time.Second},
	})
	Expect(err).NotTo(HaveOccurred())
	return c
}
