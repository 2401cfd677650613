package lab

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	netbootv1 "github.com/upgradelab/upgradelab/api/netboot/v1"
	"github.com/upgradelab/upgradelab/sim/ipxe"
)

// Network boot, as a server's PXE ROM and iPXE do it on a provisioning
// network: DHCP on each port in the lab file's order; the network's DHCP
// offer names a boot server (set at run time by whoever provisions, as
// Ironic's dnsmasq does: SetNetworkBoot); iPXE fetches the boot script
// with the port's MAC and runs it (sim/ipxe): our provider's one-line
// scripts (api/netboot/v1) and Ironic's boot.ipxe with its per-node
// configs alike. The kernel a script boots runs as a FromNetwork OS with
// its command line; a script that exits or fails, or a boot server with
// no script for the MAC (404), passes to the next boot device; a reboot
// or poweroff in a script resets or powers off the host.

// SetNetworkBoot makes network's DHCP offer a boot server: its URL gets
// ?mac=MAC of the booting port. An empty url withdraws the offer.
func (l *Lab) SetNetworkBoot(network, bootURL string) error {
	if _, ok := l.def.Spec.Network(network); !ok {
		return fmt.Errorf("lab %s: network boot on %q: no such network", l.def.Spec.Name, network)
	}
	if bootURL != "" {
		if u, err := url.Parse(bootURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("lab %s: network boot on %s: %q is not an http(s) URL", l.def.Spec.Name, network, bootURL)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if bootURL == "" {
		delete(l.netboot, network)
	} else {
		l.netboot[network] = bootURL
	}
	return nil
}

func (l *Lab) bootServer(network string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.netboot[network]
}

// netboot tries each port in turn: the port's DHCP offer names the boot
// server, whose script iPXE runs (sim/ipxe) with the port's MAC.
func (h *Host) netboot(ctx context.Context) (*RunningOS, error) {
	var tried, macs []string
	for _, n := range h.spec.NICs {
		macs = append(macs, n.MAC)
	}
	for _, n := range h.spec.NICs {
		server := h.lab.bootServer(n.Network)
		if server == "" {
			tried = append(tried, n.Name+": PXE-E16: no valid offer received")
			continue
		}
		out := ipxe.Run(ctx, h.ipxeEnv(n.MAC, macs), scriptURL(server, n.MAC))
		switch out.End {
		case ipxe.Reboot, ipxe.PowerOff:
			return nil, errNetbootPower{out.End}
		case ipxe.Exit:
			why := "the boot script exits"
			if out.Err != nil {
				why = out.Err.Error()
			}
			tried = append(tried, n.Name+": "+why)
			continue
		}
		m, err := imagev1.ReadManifest(out.Image)
		if err != nil {
			return nil, fmt.Errorf("network boot %s: %w", out.Kernel, err)
		}
		h.emit(EventBoot, "NetworkBoot", fmt.Sprintf("%s (%s): boot %s", n.Name, n.MAC, out.Kernel),
			map[string]string{"port": n.Name, "mac": n.MAC, "url": out.Kernel})
		return &RunningOS{Source: FromNetwork, Image: m, Media: out.Kernel, KernelArgs: out.Args}, nil
	}
	return nil, fmt.Errorf("network boot: %s", strings.Join(tried, "; "))
}

// errNetbootPower is a boot script's reboot or poweroff.
type errNetbootPower struct{ end ipxe.End }

func (e errNetbootPower) Error() string { return "the boot script ran " + string(e.end) }

// ipxeEnv is what iPXE sees of the host: its ports' MACs, the network,
// and the lab's clock.
func (h *Host) ipxeEnv(mac string, macs []string) ipxe.Env {
	return ipxe.Env{MAC: mac, NICs: macs,
		Fetch: func(ctx context.Context, url string) ([]byte, error) { return readMedia(ctx, url, mediaBytes) },
		Sleep: h.lab.scale.Sleep,
		Echo:  func(line string) { h.emit(EventBoot, "NetworkBootMessage", line, nil) },
	}
}

// scriptURL is the boot server's URL with the booting port's MAC.
func scriptURL(server, mac string) string {
	u, err := url.Parse(server)
	if err != nil {
		return server
	}
	q := u.Query()
	q.Set(netbootv1.MACParam, mac)
	u.RawQuery = q.Encode()
	return u.String()
}
