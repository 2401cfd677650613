package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/site"
)

func newLabCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "lab", Short: "The simulated bare-metal lab"}
	cmd.AddCommand(newLabUpCommand(), newLabStatusCommand())
	return cmd
}

func newLabUpCommand() *cobra.Command {
	var labFile, stateDir, scale, backend string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a lab in the foreground until Ctrl-C",
		Long: `Defines every host of the lab file as a libvirt domain (the in-process
test:/// driver), starts a BMC per host on loopback: Redfish over HTTPS
(site CA in STATE/bmc-ca.crt) and IPMI v2.0 over LAN (UDP, for ipmitool
-I lanplus), as the lab file's bmc.protocols say. It runs each host's OS
agent, serves the image catalog and writes STATE/lab.json with each
host's bmc.address, ipmi, username, password and caFile. A provider
certificate from the same CA is written to STATE/provider-certs (for
upgradelab-baremetal --cert-dir). Hosts start powered off. Ctrl-C powers them off and stops; the state folder keeps
disks and NICs for the next 'lab up'.

--backend qemu (or backend: qemu in the lab file) makes each host a real
VM instead: a private libvirtd, QEMU under TCG, OVMF, GRUB's A/B choice,
Debian's cloud kernel and the upgradelab guest as init, from a GPT disk in
STATE/hosts/NAME/vm. The BMCs' power and reset act on the VMs; each host's
guest agent API and console log are printed and written to lab.json.
Virtual media, network boot and the lab's in-process agents are not wired
to VMs yet.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ts, err := timescale.Parse(scale)
			if err != nil {
				return err
			}
			def, err := lab.Load(labFile)
			if err != nil {
				return err
			}
			s, err := site.Start(cmd.Context(), site.Options{Lab: def, StateDir: stateDir, Scale: ts, Backend: backend})
			if err != nil {
				return err
			}
			defer s.Stop()
			l := s.Lab
			if err := s.WriteProviderCertificate(filepath.Join(stateDir, "provider-certs")); err != nil {
				return err
			}
			info := l.Info()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "lab %s is up: %d hosts, images at %s, time scale %g\n", info.Name, len(info.Hosts), info.ImageServer, info.TimeScale)
			for _, h := range info.Hosts {
				fmt.Fprintf(out, "  %-10s BMC %s\n", h.Name, bmcEndpoints(h.BMC))
				if h.Guest != "" {
					fmt.Fprintf(out, "  %-10s guest %s, console %s\n", "", h.Guest, h.Console)
				}
			}
			fmt.Fprintf(out, "  %s\n  upgradelab lab status --state %s\nCtrl-C stops it.\n", filepath.Join(info.StateDir, "lab.json"), stateDir)
			events, cancel := l.Subscribe()
			defer cancel()
			for {
				select {
				case e := <-events:
					fmt.Fprintf(out, "%s %-10s %-6s %-18s %s\n", e.Time.Format("15:04:05.000"), e.Host, e.Kind, e.Reason, e.Message)
				case <-cmd.Context().Done():
					fmt.Fprintln(out, "powering the lab off")
					return nil
				}
			}
		},
	}
	cmd.Flags().StringVar(&labFile, "lab", "fixtures/labs/single-node.yaml", "lab definition file")
	cmd.Flags().StringVar(&stateDir, "state", "_artifacts/lab", "state folder (lab.json, disks, events.jsonl)")
	cmd.Flags().StringVar(&scale, "time-scale", "1", "real time per modelled time (0.01 runs 100x faster)")
	cmd.Flags().StringVar(&backend, "backend", "", "what runs the hosts: test (modelled) or qemu (real VMs); default: the lab file's")
	return cmd
}

func newLabStatusCommand() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every host of a lab from its state folder",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, hosts, err := lab.ReadState(stateDir)
			if err != nil {
				return err
			}
			printLabStatus(cmd.OutOrStdout(), info, hosts)
			return nil
		},
	}
	cmd.Flags().StringVar(&stateDir, "state", "_artifacts/lab", "state folder of the lab")
	return cmd
}

func printLabStatus(out io.Writer, info lab.Info, hosts []lab.HostStatus) {
	running := "stopped"
	if info.PID > 0 && syscall.Kill(info.PID, 0) == nil {
		running = fmt.Sprintf("running (pid %d)", info.PID)
	}
	fmt.Fprintf(out, "lab %s: %s, state %s\n", info.Name, running, info.StateDir)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "HOST\tPOWER\tPHASE\tRUNNING\tOS\tIMAGES\tNICS\tBMC")
	bmcs := map[string]string{}
	for _, h := range info.Hosts {
		if h.BMC != nil {
			bmcs[h.Name] = bmcEndpoints(h.BMC)
		}
	}
	for _, h := range hosts {
		osDesc := "-"
		if h.OS != nil {
			osDesc = h.OS.Image.Name + " (" + string(h.OS.Source)
			if h.OS.Root != "" {
				osDesc += " " + string(h.OS.Root)
			}
			osDesc += ")"
		}
		var nics []string
		for _, p := range h.Ports {
			nics = append(nics, p.Name+" "+p.Active.Firmware+" "+string(p.Flash))
		}
		im := h.Disk.Images()
		var roots []string
		for _, r := range im.Roots {
			roots = append(roots, rootDesc(r))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Name, h.Power, h.Phase, osDesc,
			im.Kind, strings.Join(roots, ", "), strings.Join(nics, ", "), bmcs[h.Name])
	}
	w.Flush()
}

// rootDesc is one slot or deployment: "A: written img good".
func rootDesc(r disk.Root) string {
	if r.State == disk.Empty {
		return string(r.ID) + ": empty"
	}
	d := string(r.ID) + ": " + string(r.State) + " " + r.Image
	if r.Committed {
		d += " good"
	} else if r.TriesLeft > 0 {
		d += fmt.Sprintf(" tries=%d", r.TriesLeft)
	}
	return d
}

// bmcEndpoints says how to reach a BMC: its Redfish system URL and its
// IPMI address, where it serves them.
func bmcEndpoints(b *lab.BMCInfo) string {
	if b == nil {
		return "-"
	}
	var out []string
	if b.Address != "" {
		out = append(out, b.Address)
	}
	if b.IPMI != "" {
		out = append(out, "ipmi "+b.IPMI)
	}
	return strings.Join(out, ", ")
}
