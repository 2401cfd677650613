package lab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	netbootv1 "github.com/upgradelab/upgradelab/api/netboot/v1"
)

// Network boot, as a server's PXE ROM and iPXE do it on a provisioning
// network: DHCP on each port in the lab file's order; the network's DHCP
// offer names a boot server (set at run time by whoever provisions, as
// Ironic's dnsmasq does: SetNetworkBoot); the firmware fetches the boot
// script for the port's MAC and runs it (api/netboot/v1). A script that
// chains an image boots it as a FromNetwork OS; one that exits, or a
// boot server with no script for the MAC (404), passes to the next boot
// device, as iPXE's exit does.

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

// netboot tries each port in turn.
func (h *Host) netboot(ctx context.Context) (*RunningOS, error) {
	var tried []string
	for _, n := range h.spec.NICs {
		server := h.lab.bootServer(n.Network)
		if server == "" {
			tried = append(tried, n.Name+": PXE-E16: no valid offer received")
			continue
		}
		script, err := fetchScript(ctx, server, n.MAC)
		if err != nil {
			tried = append(tried, n.Name+": "+err.Error())
			continue
		}
		if script.Chain == "" {
			tried = append(tried, n.Name+": the boot script exits")
			continue
		}
		payload, err := readMedia(ctx, script.Chain, imagev1.PayloadBytes)
		if err != nil {
			return nil, err
		}
		m, err := imagev1.ReadManifest(payload)
		if err != nil {
			return nil, fmt.Errorf("network boot %s: %w", script.Chain, err)
		}
		h.emit(EventBoot, "NetworkBoot", fmt.Sprintf("%s (%s): chain %s", n.Name, n.MAC, script.Chain),
			map[string]string{"port": n.Name, "mac": n.MAC, "url": script.Chain})
		return &RunningOS{Source: FromNetwork, Image: m, Media: script.Chain}, nil
	}
	return nil, fmt.Errorf("network boot: %s", strings.Join(tried, "; "))
}

func fetchScript(ctx context.Context, server, mac string) (netbootv1.Script, error) {
	u, err := url.Parse(server)
	if err != nil {
		return netbootv1.Script{}, err
	}
	q := u.Query()
	q.Set(netbootv1.MACParam, mac)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return netbootv1.Script{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return netbootv1.Script{}, fmt.Errorf("boot script %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return netbootv1.Script{}, fmt.Errorf("boot script %s: no script for this MAC", u)
	}
	if resp.StatusCode != http.StatusOK {
		return netbootv1.Script{}, fmt.Errorf("boot script %s: %s", u, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return netbootv1.Script{}, fmt.Errorf("boot script %s: %w", u, err)
	}
	s, err := netbootv1.Parse(body)
	if err != nil {
		return netbootv1.Script{}, fmt.Errorf("boot script %s: %w", u, err)
	}
	return s, nil
}
