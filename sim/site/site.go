package site

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/upgradelab/upgradelab/internal/loopback"
	"github.com/upgradelab/upgradelab/internal/pki"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/agent"
	"github.com/upgradelab/upgradelab/sim/bmc"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/workload"
)

// Options configure a site.
type Options struct {
	Lab      *lab.Definition
	StateDir string
	Scale    timescale.Scale
	// Timing is the agents' modelled kubeadm and kubelet timing (default
	// agent.DefaultTiming).
	Timing *agent.Timing
	// Backend overrides the lab file's backend ("test" or "qemu").
	Backend string
}

// Site is a running site.
type Site struct {
	Lab       *lab.Lab
	BMCs      *bmc.Fleet
	Workloads *workload.Clusters
	// CA signs every certificate of the site; CAFile holds it in PEM.
	CA     *pki.CA
	CAFile string

	agents map[string]*agent.Agent
	apis   map[string]*agent.API
	unsubs []func()
	cancel context.CancelFunc
}

// Start brings the lab up with its BMCs, starts the workload cluster
// network and one agent per host, each serving its API on loopback.
func Start(ctx context.Context, opts Options) (s *Site, err error) {
	ca, err := pki.NewCA("upgradelab site " + opts.Lab.Spec.Name + " CA")
	if err != nil {
		return nil, err
	}
	s = &Site{CA: ca, agents: map[string]*agent.Agent{}, apis: map[string]*agent.API{}}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if s.Lab, err = lab.Up(ctx, opts.Lab, lab.Options{StateDir: opts.StateDir, Scale: opts.Scale, Kind: opts.Backend}); err != nil {
		return s, err
	}
	if s.BMCs, err = bmc.StartFleet(s.Lab, ca); err != nil {
		return s, err
	}
	s.CAFile = s.BMCs.CAFile
	// The site runs until Stop, not until the caller's ctx ends.
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if s.Workloads, err = workload.Start(runCtx, workload.Options{Scale: opts.Scale}); err != nil {
		return s, err
	}
	timing := agent.DefaultTiming
	if opts.Timing != nil {
		timing = *opts.Timing
	}
	for _, h := range s.Lab.Hosts() {
		// On a qemu host the OS is split: the VM's guest boots and owns
		// the disk (the lab forwards the agent's disk operations to it),
		// and this agent is the rest: the deploy ramdisk's callbacks, the
		// config drive, the simulated kubeadm and kubelet.
		a := agent.New(h, s.Workloads, opts.Scale, timing)
		a.SetProvisioner(agent.Provisioner{Client: s.trusting()})
		pair, err := ca.Serving("agent "+h.Name(), []string{"127.0.0.1", "localhost"})
		if err != nil {
			return s, err
		}
		cert, err := pair.TLS()
		if err != nil {
			return s, err
		}
		addr, err := loopback.Addr() // a crashed agent binds it again
		if err != nil {
			return s, err
		}
		api, err := agent.ServeAPI(a, cert, ca.Pool(), addr)
		if err != nil {
			return s, err
		}
		s.apis[h.Name()] = api
		events, unsubscribe := s.Lab.Subscribe()
		s.unsubs = append(s.unsubs, unsubscribe)
		go a.Run(runCtx, events)
		s.agents[h.Name()] = a
	}
	return s, nil
}

// Agent is the OS agent of host.
func (s *Site) Agent(host string) (*agent.Agent, error) {
	a, ok := s.agents[host]
	if !ok {
		return nil, fmt.Errorf("site: no host %q", host)
	}
	return a, nil
}

// CrashAgent makes host's agent crash and come back after down (see
// agent.API.Crash).
func (s *Site) CrashAgent(host string, down time.Duration) error {
	api, ok := s.apis[host]
	if !ok {
		return fmt.Errorf("site: no host %q", host)
	}
	api.Crash(down)
	return nil
}

// JoinRegistrationPool bakes a registration URL into host's recovery
// media (Elemental's seed image): from its next recovery boot on, the
// host registers there.
func (s *Site) JoinRegistrationPool(host, registrationURL string) error {
	a, err := s.Agent(host)
	if err != nil {
		return err
	}
	a.SetProvisioner(agent.Provisioner{Client: s.trusting(), RegistrationURL: registrationURL})
	return nil
}

// trusting is how a host reaches its provisioner: trusting the site CA.
func (s *Site) trusting() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.CA.Pool(), MinVersion: tls.VersionTLS12}}}
}

// VIP assigns the API server address of a workload cluster
// (NAMESPACE/NAME), as kube-vip or a load balancer would on a real site.
func (s *Site) VIP(ctx context.Context, cluster string) (workload.Endpoint, error) {
	return s.Workloads.Create(ctx, cluster)
}

// WriteProviderCertificate writes a certificate for the provider into
// dir (tls.crt, tls.key): it serves the provider's callback endpoint on
// loopback and is the client certificate host agents accept.
func (s *Site) WriteProviderCertificate(dir string) error {
	pair, err := s.CA.Peer("upgradelab provider", []string{"127.0.0.1", "localhost"})
	if err != nil {
		return err
	}
	return pair.Write(dir)
}

// ProviderCertificate is the same kind of certificate for a caller in
// this process (a test acting as the provider).
func (s *Site) ProviderCertificate() (tls.Certificate, error) {
	pair, err := s.CA.Peer("upgradelab provider", []string{"127.0.0.1", "localhost"})
	if err != nil {
		return tls.Certificate{}, err
	}
	return pair.TLS()
}

// Stop ends agents, BMCs, workload clusters and the lab.
func (s *Site) Stop() {
	if s.cancel != nil {
		s.cancel()
	}
	for _, unsubscribe := range s.unsubs {
		unsubscribe()
	}
	var errs []error
	for _, api := range s.apis {
		errs = append(errs, api.Close())
	}
	if s.BMCs != nil {
		errs = append(errs, s.BMCs.Close())
	}
	if s.Workloads != nil {
		s.Workloads.Stop(context.Background())
	}
	if s.Lab != nil {
		s.Lab.Down()
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, "site: stopping:", err)
	}
}
