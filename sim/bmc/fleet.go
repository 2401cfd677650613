package bmc

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/upgradelab/upgradelab/internal/loopback"
	"github.com/upgradelab/upgradelab/internal/pki"
	"github.com/upgradelab/upgradelab/sim/ipmi"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// Fleet is one BMC per lab host, all with certificates from one lab CA:
// its Redfish service and its IPMI over LAN interface, each where the
// lab file's bmc.protocols has it.
type Fleet struct {
	// BMCs are the Redfish services, IPMI the IPMI interfaces, by host.
	BMCs   map[string]*BMC
	IPMI   map[string]*ipmi.BMC
	CAFile string
}

// StartFleet starts a BMC for every host of l on its own loopback port,
// with certificates from ca (a new lab CA when nil), writes the CA to
// STATE/bmc-ca.crt and records each endpoint and its credentials (from
// the lab file) in lab.json.
func StartFleet(l *lab.Lab, ca *pki.CA) (*Fleet, error) {
	if ca == nil {
		var err error
		if ca, err = pki.NewCA("upgradelab lab " + l.Definition().Spec.Name + " BMC CA"); err != nil {
			return nil, err
		}
	}
	caFile := filepath.Join(l.StateDir(), "bmc-ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		return nil, err
	}
	pair, err := ca.Serving("upgradelab BMCs", []string{"127.0.0.1", "localhost"})
	if err != nil {
		return nil, err
	}
	cert, err := pair.TLS()
	if err != nil {
		return nil, err
	}
	f := &Fleet{BMCs: map[string]*BMC{}, IPMI: map[string]*ipmi.BMC{}, CAFile: caFile}
	infos := map[string]lab.BMCInfo{}
	spec := l.Definition().Spec
	for i, h := range l.Hosts() {
		cred, ok := spec.Credential(h.Spec().BMC.Credentials)
		if !ok {
			f.Close()
			return nil, fmt.Errorf("host %s: bmc.credentials %q not in the lab", h.Name(), h.Spec().BMC.Credentials)
		}
		info := lab.BMCInfo{Username: cred.Username, Password: cred.Password}
		// One controller serves both protocols: when it reboots itself
		// through one, the other goes down too.
		name := h.Name()
		redfishDown := func(d time.Duration) {
			if b := f.BMCs[name]; b != nil {
				b.Unreachable(d)
			}
		}
		ipmiDown := func(d time.Duration) {
			if b := f.IPMI[name]; b != nil {
				b.Unreachable(d)
			}
		}
		if h.Spec().BMC.Serves(lab.ProtocolRedfish) {
			b, err := Start(Config{Host: h, Username: cred.Username, Password: cred.Password, Certificate: cert,
				Scale: l.Scale(), NVMImages: l.Definition().NVMImages, BIOSVersion: "2.19.1", BMCVersion: bmcVersion, OnReboot: ipmiDown})
			if err != nil {
				f.Close()
				return nil, err
			}
			f.BMCs[h.Name()] = b
			info.Address, info.CAFile = b.SystemURL(), caFile
		}
		if h.Spec().BMC.Serves(lab.ProtocolIPMI) {
			addr, err := ipmiAddr(i)
			if err != nil {
				f.Close()
				return nil, err
			}
			b, err := ipmi.Start(ipmi.Config{Host: h, Username: cred.Username, Password: cred.Password, Addr: addr,
				Scale: l.Scale(), FirmwareVersion: bmcVersion, OnReboot: redfishDown})
			if err != nil {
				f.Close()
				return nil, err
			}
			f.IPMI[h.Name()] = b
			info.IPMI = b.Addr()
		}
		infos[h.Name()] = info
	}
	if err := l.RecordBMCs(infos); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ipmiAddr is the IPMI address of the lab's host i: a loopback address
// of its own (127.1.0.1, 127.1.0.2, ...; Linux routes all of 127/8 to
// loopback) and a port from the harness's range. Clients treat a BMC as
// its IP: Ironic keeps its ipmitool commands to one address five
// seconds apart ([ipmi] min_command_interval), so BMCs sharing 127.0.0.1
// would be paced as one and a lab's hosts would wait on each other.
func ipmiAddr(i int) (string, error) {
	free, err := loopback.Addr()
	if err != nil {
		return "", err
	}
	_, port, err := net.SplitHostPort(free)
	if err != nil {
		return "", err
	}
	ip := netip.AddrFrom4([4]byte{127, 1, byte(i / 250), byte(i%250 + 1)})
	return net.JoinHostPort(ip.String(), port), nil
}

// bmcVersion is the BMC firmware the lab's servers ship with.
const bmcVersion = "7.00"

// Close stops every BMC.
func (f *Fleet) Close() error {
	var errs []error
	for _, b := range f.BMCs {
		errs = append(errs, b.Close())
	}
	for _, b := range f.IPMI {
		errs = append(errs, b.Close())
	}
	return errors.Join(errs...)
}
