package ironic

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/site"
)

// deployImage is the image every deploy of these tests writes.
const deployImage = "ubuntu-24.04-k8s-v1.35.3"

// enroll makes host a node with the lab's deploy ramdisk and brings it
// to manageable, inspected in band: the deploy ramdisk reports to
// ironic-inspector, as baremetal-operator v0.11 has this Ironic inspect.
func enroll(t testing.TB, ctx context.Context, s *site.Site, c *Client, host string) {
	t.Helper()
	var info *lab.HostInfo
	for _, h := range s.Lab.Info().Hosts {
		if h.Name == host {
			info = &h
		}
	}
	node := redfishNode(host, info.BMC)
	if info.BMC.Address == "" {
		node = ipmiNode(host, info.BMC)
	}
	node["inspect_interface"] = "inspector"
	ramdisk := s.Lab.ImageServer().ImageURL("deploy-ramdisk-2026.10")
	di := node["driver_info"].(map[string]any)
	di["deploy_kernel"], di["deploy_ramdisk"] = ramdisk, ramdisk
	var created Node
	if err := c.Do(ctx, http.MethodPost, "/v1/nodes", node, &created); err != nil {
		t.Fatal(err)
	}
	if info.BMC.Address == "" {
		// A network-booted node needs its boot port before anything
		// boots it, as BMO creates it from spec.bootMACAddress.
		port := map[string]any{"node_uuid": created.UUID, "address": info.MACs[0]}
		if err := c.Do(ctx, http.MethodPost, "/v1/ports", port, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, target := range []string{"manage", "inspect"} {
		provision(t, ctx, c, host, map[string]any{"target": target}, "manageable")
	}
	checkInventory(t, ctx, s, c, host)
}

// checkInventory checks what inspection stored for host against the lab
// file: CPUs, memory, the disk, every NIC's MAC, and each NIC's driver
// and firmware from the extra-hardware collector.
func checkInventory(t testing.TB, ctx context.Context, s *site.Site, c *Client, host string) {
	t.Helper()
	var got struct {
		Inventory struct {
			CPU struct {
				Count int `json:"count"`
			} `json:"cpu"`
			Memory struct {
				PhysicalMB int `json:"physical_mb"`
			} `json:"memory"`
			Disks      []struct{ Size int64 } `json:"disks"`
			Interfaces []struct {
				MAC string `json:"mac_address"`
			} `json:"interfaces"`
		} `json:"inventory"`
		PluginData struct {
			Data [][]string `json:"data"`
		} `json:"plugin_data"`
	}
	// Ironic marks the inspection done, then fetches inspector's data and
	// stores it (drivers/modules/inspector.py, _check_status): the
	// inventory can be missing for a moment after the node is manageable.
	for {
		err := c.Do(ctx, http.MethodGet, "/v1/nodes/"+host+"/inventory", nil, &got)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "404") || ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	h, _ := s.Lab.Host(host)
	spec, inv := h.Spec(), got.Inventory
	if inv.CPU.Count != spec.CPUs || inv.Memory.PhysicalMB != spec.MemoryMiB || len(inv.Disks) != 1 || inv.Disks[0].Size != int64(spec.DiskGiB)<<30 {
		t.Errorf("%s inspected as %+v; want %d CPUs, %d MiB, a %d GiB disk", host, inv, spec.CPUs, spec.MemoryMiB, spec.DiskGiB)
	}
	facts := fmt.Sprint(got.PluginData.Data)
	for i, n := range spec.NICs {
		if i >= len(inv.Interfaces) || !strings.EqualFold(inv.Interfaces[i].MAC, n.MAC) || !strings.Contains(facts, "[network "+n.Name+" driver "+n.Model+"]") {
			t.Errorf("%s inspected NICs %+v, facts %s; want %s (%s, driver %s)", host, inv.Interfaces, facts, n.Name, n.MAC, n.Model)
		}
	}
}

// provision asks for a provision state change and waits for want.
func provision(t testing.TB, ctx context.Context, c *Client, node string, body map[string]any, want string) *Node {
	t.Helper()
	if err := c.Do(ctx, http.MethodPut, "/v1/nodes/"+node+"/states/provision", body, nil); err != nil {
		t.Fatal(err)
	}
	return waitState(t, ctx, c, node, want)
}

// setImage points the node's instance_info at the lab's image, with the
// given sha256.
func setImage(t testing.TB, ctx context.Context, s *site.Site, c *Client, node, sha256 string) {
	t.Helper()
	patch := []map[string]any{
		{"op": "add", "path": "/instance_info/image_source", "value": s.Lab.ImageServer().ImageURL(deployImage)},
		{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
		{"op": "add", "path": "/instance_info/image_os_hash_value", "value": sha256},
		{"op": "add", "path": "/instance_info/image_disk_format", "value": "raw"},
	}
	if err := c.Do(ctx, http.MethodPatch, "/v1/nodes/"+node, patch, nil); err != nil {
		t.Fatal(err)
	}
}

// Ironic cleans and deploys lab hosts through the lab's deploy ramdisk,
// which speaks its agent protocol: cleaning really erases the disk, the
// image is written through the disk contract of an A/B host and of an
// OSTree host, with Ironic's config drive, and each host then boots it
// from disk; a wrong checksum fails the deploy as Ironic reports it.
func TestIronicCleansAndDeploysLabHostsThroughTheDeployRamdisk(t *testing.T) {
	t.Parallel() // beside the IPMI deploy, which mostly waits
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel) // after the parallel subtests
	s, _, c := startSite(t, ctx, "cold-spare.yaml")
	img, err := s.Lab.Definition().Catalog.Get(deployImage)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"worker-0", "worker-1"} { // A/B, OSTree
		t.Run(host, func(t *testing.T) {
			t.Parallel()
			deployAndBoot(t, ctx, s, c, host, img.SHA256)
		})
	}
	t.Run("cp-0 with a wrong checksum", func(t *testing.T) {
		t.Parallel()
		enroll(t, ctx, s, c, "cp-0")
		provision(t, ctx, c, "cp-0", map[string]any{"target": "provide"}, "available")
		setImage(t, ctx, s, c, "cp-0", strings.Repeat("0", 64))
		if err := c.Do(ctx, http.MethodPut, "/v1/nodes/cp-0/states/provision", map[string]any{"target": "active"}, nil); err != nil {
			t.Fatal(err)
		}
		n := waitFailed(t, ctx, c, "cp-0", "deploy failed")
		if !strings.Contains(deref(n.LastError), "sha256") {
			t.Errorf("a deploy with a wrong checksum failed with %q; want the host's checksum error", deref(n.LastError))
		}
	})
}

// An IPMI-only host boots Ironic's deploy ramdisk from the network: the
// provisioning network's DHCP names Ironic's boot.ipxe, which chains the
// per-node config Ironic writes for the port's MAC (kernel, initrd, and
// the agent's command line), and the lab's iPXE runs both. Inspection,
// cleaning and the deploy then go as on a Redfish host, and the host
// boots what was written from its disk.
func TestIronicDeploysAnIPMIHostThroughNetworkBoot(t *testing.T) {
	t.Parallel() // mostly Ironic's pauses between ipmitool commands
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, ir, c := startSite(t, ctx, "three-node-ipmi.yaml")
	if err := s.Lab.SetNetworkBoot("provisioning", ir.BootScriptURL()); err != nil {
		t.Fatal(err)
	}
	img, err := s.Lab.Definition().Catalog.Get(deployImage)
	if err != nil {
		t.Fatal(err)
	}
	events, stop := s.Lab.Subscribe()
	netboots := make(chan int)
	go func() {
		n := 0
		for e := range events {
			if e.Host == "cp-0" && e.Reason == "NetworkBoot" && strings.HasPrefix(e.Data["url"], ir.HTTPURL+"/") {
				n++
			}
		}
		netboots <- n
	}()
	deployAndBoot(t, ctx, s, c, "cp-0", img.SHA256)
	stop()
	booted := <-netboots
	if booted < 3 { // inspection, cleaning, deploy
		t.Errorf("cp-0 booted Ironic's kernel from the network %d times; want one each for inspection, cleaning and the deploy", booted)
	}
}

// deployAndBoot cleans host, deploys the image with a config drive and
// checks what the host then runs.
func deployAndBoot(t *testing.T, ctx context.Context, s *site.Site, c *Client, host, sha256 string) {
	t.Helper()
	h, err := s.Lab.Host(host)
	if err != nil {
		t.Fatal(err)
	}
	enroll(t, ctx, s, c, host)
	provision(t, ctx, c, host, map[string]any{"target": "provide"}, "available")
	setImage(t, ctx, s, c, host, sha256)
	provision(t, ctx, c, host, map[string]any{"target": "active",
		"configdrive": map[string]any{"meta_data": map[string]any{"local-hostname": host + "-node", "uuid": "u-" + host}}}, "active")
	deadline := time.Now().Add(time.Minute)
	for {
		st := h.Status()
		if st.OS != nil && st.OS.Source == lab.FromDisk && st.OS.Image.Name == deployImage {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the deploy runs %+v; want %s from disk", host, st.OS, deployImage)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := h.MetaData()["local-hostname"]; got != host+"-node" {
		t.Errorf("%s: config drive meta data local-hostname %q, want %s-node", host, got, host)
	}
	// Undeployed, the host is cleaned: nothing of it is left on the disk.
	if err := h.SetPersistent("app/marker", "data of the deployed OS"); err != nil {
		t.Errorf("%s: %v", host, err)
	}
	provision(t, ctx, c, host, map[string]any{"target": "deleted"}, "available")
	if st := h.Status(); st.Disk.Images().Booted != nil || len(h.Persistent()) != 0 || len(h.MetaData()) != 0 || st.Power != lab.PoweredOff {
		t.Errorf("%s after cleaning: booted root %+v, persistent %v, meta data %v, power %s; want a blank disk, powered off",
			host, st.Disk.Images().Booted, h.Persistent(), h.MetaData(), st.Power)
	}
}

// waitFailed waits for node to reach a failed state.
func waitFailed(t *testing.T, ctx context.Context, c *Client, node, state string) *Node {
	t.Helper()
	for {
		n, err := c.Node(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		if n.ProvisionState == state {
			return n
		}
		if ctx.Err() != nil {
			t.Fatalf("node %s: %s, want %s", node, n.ProvisionState, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
