package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"

	"github.com/upgradelab/upgradelab/sim/lab"
)

func TestLabUpWritesStateAndStatusReadsIt(t *testing.T) {
	state := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	up := newRootCommand()
	var out bytes.Buffer
	up.SetOut(&out)
	up.SetArgs([]string{"lab", "up", "--lab", "../../fixtures/labs/three-node.yaml", "--state", state, "--time-scale", "0"})
	done := make(chan error, 1)
	go func() { done <- up.ExecuteContext(ctx) }()

	deadline := time.Now().Add(10 * time.Second)
	var status bytes.Buffer
	for {
		status.Reset()
		st := newRootCommand()
		st.SetOut(&status)
		st.SetArgs([]string{"lab", "status", "--state", state})
		if st.Execute() == nil && strings.Contains(status.String(), "https://") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lab status never found the lab")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A user powers cp-1 on through its BMC, as lab.json describes it.
	info, _, err := lab.ReadState(state)
	if err != nil {
		t.Fatal(err)
	}
	bmcInfo := info.Hosts[1].BMC
	caPEM, err := os.ReadFile(bmcInfo.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	endpoint := strings.SplitN(bmcInfo.Address, "/redfish", 2)[0]
	c, err := gofish.Connect(gofish.ClientConfig{Endpoint: endpoint, Username: bmcInfo.Username, Password: bmcInfo.Password,
		HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}})
	if err != nil {
		t.Fatalf("gofish with lab.json's BMC entry: %v", err)
	}
	sys, err := redfish.GetComputerSystem(c, strings.TrimPrefix(bmcInfo.Address, endpoint))
	if err != nil {
		t.Fatal(err)
	}
	if err := sys.Reset(redfish.OnResetType); err != nil {
		t.Fatal(err)
	}
	// And cp-2 with ipmitool over its IPMI address, as the README shows.
	ipmiHost, ipmiPort, _ := strings.Cut(info.Hosts[2].BMC.IPMI, ":")
	ipmitool := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ipmitool", append([]string{"-I", "lanplus", "-H", ipmiHost, "-p", ipmiPort,
			"-U", bmcInfo.Username, "-P", bmcInfo.Password}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ipmitool %v against lab up: %v\n%s", args, err, out)
		}
		return string(out)
	}
	ipmitool("chassis", "power", "on")
	if out := ipmitool("chassis", "power", "status"); !strings.Contains(out, "Chassis Power is on") {
		t.Fatalf("ipmitool power status after power on: %s", out)
	}
	status.Reset()
	st := newRootCommand()
	st.SetOut(&status)
	st.SetArgs([]string{"lab", "status", "--state", state})
	if err := st.Execute(); err != nil {
		t.Fatal(err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("lab up: %v", err)
	}
	got := status.String()
	for _, want := range []string{"lab three-node: running", "cp-0", "cp-2", "eno1 9.20 idle", "cp-1  On", "cp-2  On", "https://127.0.0.1:", ", ipmi 127.0.0.1:"} {
		if !strings.Contains(got, want) {
			t.Errorf("lab status output lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(out.String(), filepath.Join(state, "lab.json")) {
		t.Errorf("lab up did not print where lab.json is:\n%s", out.String())
	}

	bad := newRootCommand()
	bad.SetArgs([]string{"lab", "up", "--lab", "../../fixtures/labs/three-node.yaml", "--state", state, "--time-scale", "fast"})
	if err := bad.Execute(); err == nil || !strings.Contains(err.Error(), `time scale "fast"`) {
		t.Fatalf("bad --time-scale: %v", err)
	}
}
