package ironic

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/labtest"
	"github.com/upgradelab/upgradelab/sim/site"
)

// startSite brings up a lab (its BMCs and hosts' agents) and Ironic.
func startSite(t testing.TB, ctx context.Context, labFile string) (*site.Site, *Ironic, *Client) {
	t.Helper()
	def, err := lab.Load(filepath.Join("..", "..", "fixtures", "labs", labFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := labtest.Dir(t)
	s, err := site.Start(ctx, site.Options{Lab: def, StateDir: filepath.Join(dir, "lab"), Scale: MinScaleFor(def)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	ir, err := Start(ctx, Options{Dir: filepath.Join(dir, "ironic")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ir.Stop)
	return s, ir, NewClient(ir.URL)
}

// redfishNode is the node Ironic enrolls for a lab host with a Redfish
// BMC, its interfaces named (none is defaulted).
func redfishNode(name string, bmc *lab.BMCInfo) map[string]any {
	u, _ := url.Parse(bmc.Address)
	return map[string]any{"name": name, "driver": "redfish", "boot_interface": "redfish-virtual-media", "inspect_interface": "redfish",
		"driver_info": map[string]any{"redfish_address": u.Scheme + "://" + u.Host, "redfish_system_id": u.Path,
			"redfish_username": bmc.Username, "redfish_password": bmc.Password, "redfish_verify_ca": bmc.CAFile}}
}

// ipmiNode is the node Ironic enrolls for a lab host whose BMC serves
// IPMI only: it boots the deploy ramdisk through iPXE.
func ipmiNode(name string, bmc *lab.BMCInfo) map[string]any {
	host, port, _ := strings.Cut(bmc.IPMI, ":")
	return map[string]any{"name": name, "driver": "ipmi", "boot_interface": "ipxe", "inspect_interface": "no-inspect",
		"management_interface": "ipmitool", "power_interface": "ipmitool",
		"driver_info": map[string]any{"ipmi_address": host, "ipmi_port": port,
			"ipmi_username": bmc.Username, "ipmi_password": bmc.Password}}
}

// waitState waits for node to reach state (or fail into an error state).
func waitState(t testing.TB, ctx context.Context, c *Client, node, state string) *Node {
	t.Helper()
	for {
		n, err := c.Node(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		if n.ProvisionState == state && n.TargetProvisionState == nil {
			return n
		}
		if strings.HasSuffix(n.ProvisionState, "failed") || ctx.Err() != nil {
			t.Fatalf("node %s: %s (last error %s), want %s", node, n.ProvisionState, deref(n.LastError), state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Ironic drives a lab host as a real BMC: enrolled, managed, inspected
// out of band while powered off (with a port per NIC), powered on and off.
func TestIronicEnrollsInspectsAndPowersALabHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, ir, c := startSite(t, ctx, "single-node.yaml")
	if ir.Version == "" || !strings.HasPrefix(ir.APIVersion, "1.") {
		t.Errorf("Ironic version %q, API %q", ir.Version, ir.APIVersion)
	}
	info := s.Lab.Info().Hosts[0]
	if err := c.Do(ctx, http.MethodPost, "/v1/nodes", redfishNode(info.Name, info.BMC), nil); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct{ target, state string }{{"manage", "manageable"}, {"inspect", "manageable"}} {
		if err := c.Do(ctx, http.MethodPut, "/v1/nodes/"+info.Name+"/states/provision", map[string]string{"target": step.target}, nil); err != nil {
			t.Fatal(err)
		}
		waitState(t, ctx, c, info.Name, step.state)
	}
	n, _ := c.Node(ctx, info.Name)
	spec, _ := s.Lab.Host(info.Name)
	if want := fmt.Sprint(spec.Spec().CPUs); fmt.Sprint(n.Properties["cpus"]) != want || n.Properties["memory_mb"] != fmt.Sprint(spec.Spec().MemoryMiB) {
		t.Errorf("inspected properties %v; want %s CPUs and %d MiB", n.Properties, want, spec.Spec().MemoryMiB)
	}
	var ports struct {
		Ports []struct {
			Address string `json:"address"`
		} `json:"ports"`
	}
	if err := c.Do(ctx, http.MethodGet, "/v1/ports?node="+info.Name, nil, &ports); err != nil {
		t.Fatal(err)
	}
	if len(ports.Ports) != len(info.MACs) || !strings.EqualFold(ports.Ports[0].Address, info.MACs[0]) {
		t.Errorf("ports after inspection %+v; want one per NIC %v", ports.Ports, info.MACs)
	}
	for _, p := range []struct {
		target string
		want   lab.PowerState
	}{{"power on", lab.PoweredOn}, {"power off", lab.PoweredOff}} {
		if err := c.Do(ctx, http.MethodPut, "/v1/nodes/"+info.Name+"/states/power", map[string]string{"target": p.target}, nil); err != nil {
			t.Fatal(err)
		}
		waitPower(t, ctx, c, info.Name, strings.TrimPrefix(p.target, "power "))
		if got := spec.Status().Power; got != p.want {
			t.Errorf("after Ironic's %s the host is %s", p.target, got)
		}
	}
}

// Stopped, Ironic leaves what it knew of its nodes in nodes.json.
func TestIronicLeavesItsNodesWhenItStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, ir, c := startSite(t, ctx, "single-node.yaml")
	info := s.Lab.Info().Hosts[0]
	if err := c.Do(ctx, http.MethodPost, "/v1/nodes", redfishNode(info.Name, info.BMC), nil); err != nil {
		t.Fatal(err)
	}
	ir.Stop()
	ir.Stop() // a second stop keeps the dump
	b, err := os.ReadFile(filepath.Join(ir.Dir, "nodes.json"))
	if err != nil || !strings.Contains(string(b), `"name": "`+info.Name+`"`) || !strings.Contains(string(b), `"provision_state": "enroll"`) {
		t.Errorf("nodes.json: %.300s, %v", b, err)
	}
}

func waitPower(t *testing.T, ctx context.Context, c *Client, node, want string) {
	t.Helper()
	for {
		n, err := c.Node(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		if deref(n.PowerState) == "power "+want {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("node %s: power %s, want %s (last error %s)", node, deref(n.PowerState), want, deref(n.LastError))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
