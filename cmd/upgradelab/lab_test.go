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
	"sync"
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
	powerOnWithGofish(t, bmcInfo)
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
	for _, want := range []string{"lab three-node: running", "cp-0", "cp-2", "eno1 9.20 idle", "cp-1  On", "cp-2  On", "https://127.0.0.1:", ", ipmi 127.1.0.1:"} {
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

// `lab up --backend qemu`, as the README shows it: a real VM powered on
// with ipmitool boots (a factory disk: GRUB picks recovery), `lab status`
// reports what its guest runs, and Ctrl-C leaves no QEMU behind.
func TestLabUpWithRealVMs(t *testing.T) {
	state := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up := newRootCommand()
	var out syncBuffer
	up.SetOut(&out)
	up.SetArgs([]string{"lab", "up", "--lab", "../../fixtures/labs/single-node.yaml", "--state", state, "--time-scale", "0.01", "--backend", "qemu"})
	done := make(chan error, 1)
	go func() { done <- up.ExecuteContext(ctx) }()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), "Ctrl-C stops it") {
		select {
		case err := <-done:
			t.Fatalf("lab up --backend qemu: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("lab up --backend qemu did not come up:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	info, _, err := lab.ReadState(state)
	if err != nil {
		t.Fatal(err)
	}
	h := info.Hosts[0]
	if h.Guest == "" || !strings.Contains(out.String(), "guest "+h.Guest) || !strings.Contains(out.String(), "console "+h.Console) {
		t.Fatalf("lab up printed no guest and console for %s:\n%s", h.Name, out.String())
	}
	ipmiHost, ipmiPort, _ := strings.Cut(h.BMC.IPMI, ":")
	if b, err := exec.Command("ipmitool", "-I", "lanplus", "-H", ipmiHost, "-p", ipmiPort, "-U", h.BMC.Username, "-P", h.BMC.Password, "chassis", "power", "on").CombinedOutput(); err != nil {
		t.Fatalf("ipmitool: %v: %s", err, b)
	}
	var status bytes.Buffer
	for {
		status.Reset()
		st := newRootCommand()
		st.SetOut(&status)
		st.SetArgs([]string{"lab", "status", "--state", state})
		if st.Execute() == nil && strings.Contains(status.String(), "recovery-ubuntu-24.04 (recovery-partition)") {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(h.Console)
			t.Fatalf("lab status never showed the VM's recovery boot:\n%s\nconsole:\n%s", status.String(), b)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(status.String(), "node-0  On     Running") || !strings.Contains(status.String(), "A: empty, B: empty") {
		t.Errorf("lab status:\n%s", status.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("lab up: %v", err)
	}
	if b, _ := exec.Command("ps", "-eo", "args").Output(); strings.Contains(string(b), filepath.Join(state, "hosts")) {
		t.Error("a QEMU process of this lab outlived lab up")
	}
}

// syncBuffer is a bytes.Buffer a command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// powerOnWithGofish powers a host on through its Redfish BMC with gofish,
// connecting as lab.json's entry says.
func powerOnWithGofish(t *testing.T, bmcInfo *lab.BMCInfo) {
	t.Helper()
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
}
