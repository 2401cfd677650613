package kind

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/upgradelab/upgradelab/internal/loopback"
)

// On kind the managers run in the node container, and the lab (BMCs,
// image server, agents, the workload clusters' API servers) stays on the
// host's loopback, where it listens on nothing else. The managers reach
// it at the addresses the lab gives (127.0.0.1:PORT) over the container
// network, by address translation on both ends:
//
//   - in the node (whose network the managers' Pods share: hostNetwork),
//     a connection to 127.0.0.1 on a lab port goes to the host's side of
//     the kind bridge (the gateway), and the host passes what arrives
//     there on a lab port to its loopback;
//   - the other way, the ports a provider listens on for the lab (a
//     callback endpoint, a boot server: Provider.LabPorts), a connection
//     from the host to 127.0.0.1 on such a port goes to the node, and the
//     node passes it to its loopback.
//
// Both ends need route_localnet on the interface that carries the
// loopback address (the kind bridge, the node's eth0); nothing else on
// the host changes, and the rules live in chains of their own, emptied
// at every start and removed at Stop. Lab ports are loopback's range
// (10300 to 29999: the harness's and CAPD's in-memory backend's), above
// every port the node's own components use (2379 to 10259) and below the
// NodePorts (30000 and up).
const (
	labPortLow  = loopback.FirstPort
	labPortHigh = 29999
)

// natRule is one iptables rule of the nat table, in a chain of ours.
type natRule struct {
	chain string
	args  []string
}

// natSide is one end's chains: each hooked from the built-in chain that
// reaches it, and its rules.
type natSide struct {
	hooks map[string]string // our chain -> built-in chain
	rules []natRule
}

// network is what the rules are made of.
type network struct {
	bridge  string // the host's interface of the kind network
	gateway string // its address on the host
	nodeIP  string // the node's address
	// labPorts are the providers' listening ports the lab connects to.
	labPorts []int
	// managerPorts are the managers' own (webhook, health, diagnostics):
	// they listen in the node, and a manager checks its own webhook
	// server on loopback, so these stay in the node.
	managerPorts []int
	// prefix names the chains, per cluster.
	prefix string
}

func (n network) chain(suffix string) string { return n.prefix + "-" + suffix }

// nodeRules are the node's: lab ports on loopback to the host, provider
// ports from the host to loopback.
func (n network) nodeRules() natSide {
	out, pre, post := n.chain("OUT"), n.chain("PRE"), n.chain("POST")
	s := natSide{hooks: map[string]string{out: "OUTPUT", pre: "PREROUTING", post: "POSTROUTING"}}
	portRange := strconv.Itoa(labPortLow) + ":" + strconv.Itoa(labPortHigh)
	for _, port := range append(slices.Clone(n.labPorts), n.managerPorts...) {
		for _, proto := range []string{"tcp", "udp"} {
			s.rules = append(s.rules, natRule{out, []string{"-d", "127.0.0.1/32", "-p", proto, "--dport", strconv.Itoa(port), "-j", "RETURN"}})
		}
	}
	for _, proto := range []string{"tcp", "udp"} {
		s.rules = append(s.rules, natRule{out, []string{"-d", "127.0.0.1/32", "-p", proto, "--dport", portRange, "-j", "DNAT", "--to-destination", n.gateway}})
	}
	s.rules = append(s.rules, natRule{post, []string{"-s", "127.0.0.1/32", "-d", n.gateway + "/32", "-j", "MASQUERADE"}})
	for _, port := range n.labPorts {
		for _, proto := range []string{"tcp", "udp"} {
			s.rules = append(s.rules, natRule{pre, []string{"-d", n.nodeIP + "/32", "-p", proto, "--dport", strconv.Itoa(port), "-j", "DNAT", "--to-destination", "127.0.0.1"}})
		}
	}
	return s
}

// hostRules are the host's: what reaches the gateway on a lab port to
// loopback, provider ports on loopback to the node.
func (n network) hostRules() natSide {
	out, pre, post := n.chain("OUT"), n.chain("PRE"), n.chain("POST")
	s := natSide{hooks: map[string]string{out: "OUTPUT", pre: "PREROUTING", post: "POSTROUTING"}}
	portRange := strconv.Itoa(labPortLow) + ":" + strconv.Itoa(labPortHigh)
	for _, proto := range []string{"tcp", "udp"} {
		s.rules = append(s.rules, natRule{pre, []string{"-i", n.bridge, "-d", n.gateway + "/32", "-p", proto, "--dport", portRange, "-j", "DNAT", "--to-destination", "127.0.0.1"}})
	}
	for _, port := range n.labPorts {
		for _, proto := range []string{"tcp", "udp"} {
			s.rules = append(s.rules, natRule{out, []string{"-d", "127.0.0.1/32", "-p", proto, "--dport", strconv.Itoa(port), "-j", "DNAT", "--to-destination", n.nodeIP}})
		}
	}
	s.rules = append(s.rules, natRule{post, []string{"-s", "127.0.0.1/32", "-d", n.nodeIP + "/32", "-j", "MASQUERADE"}})
	return s
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// script is the shell script that installs a side's rules: each chain
// made (or emptied), hooked once, filled.
func (s natSide) script(sysctls []string) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, k := range sysctls {
		fmt.Fprintf(&b, "echo 1 > /proc/sys/net/ipv4/conf/%s/route_localnet\n", k)
	}
	for _, chain := range sortedKeys(s.hooks) {
		fmt.Fprintf(&b, "iptables -t nat -N %s 2>/dev/null || iptables -t nat -F %s\n", chain, chain)
		fmt.Fprintf(&b, "iptables -t nat -C %s -j %s 2>/dev/null || iptables -t nat -I %s 1 -j %s\n", s.hooks[chain], chain, s.hooks[chain], chain)
	}
	for _, r := range s.rules {
		fmt.Fprintf(&b, "iptables -t nat -A %s %s\n", r.chain, strings.Join(r.args, " "))
	}
	return b.String()
}

// removeScript takes a side's chains out again.
func (s natSide) removeScript() string {
	var b strings.Builder
	for _, chain := range sortedKeys(s.hooks) {
		fmt.Fprintf(&b, "iptables -t nat -D %s -j %s 2>/dev/null; iptables -t nat -F %s 2>/dev/null; iptables -t nat -X %s 2>/dev/null\n", s.hooks[chain], chain, chain, chain)
	}
	b.WriteString("true\n")
	return b.String()
}

// inspectKindNetwork reads the kind network's bridge and gateway from the
// engine, and the node's address on it.
func inspectNetwork(node string) (network, error) {
	out, err := exec.Command("docker", "network", "inspect", "kind").Output()
	if err != nil {
		return network{}, fmt.Errorf("docker network inspect kind: %w", err)
	}
	var nets []struct {
		ID   string `json:"Id"`
		IPAM struct {
			Config []struct{ Subnet, Gateway string }
		}
		Options    map[string]string
		Containers map[string]struct{ Name, IPv4Address string }
	}
	if err := json.Unmarshal(out, &nets); err != nil || len(nets) != 1 {
		return network{}, fmt.Errorf("docker network inspect kind: %s (%d networks)", fmt.Sprint(err), len(nets))
	}
	n := network{bridge: nets[0].Options["com.docker.network.bridge.name"]}
	if n.bridge == "" {
		n.bridge = "br-" + nets[0].ID[:12]
	}
	for _, c := range nets[0].IPAM.Config {
		if strings.Contains(c.Gateway, ".") {
			n.gateway = c.Gateway
		}
	}
	for _, c := range nets[0].Containers {
		if c.Name == node {
			n.nodeIP, _, _ = strings.Cut(c.IPv4Address, "/")
		}
	}
	if n.gateway == "" || n.nodeIP == "" {
		return network{}, fmt.Errorf("kind network: no IPv4 gateway (%q) or node %s address (%q)", n.gateway, node, n.nodeIP)
	}
	return n, nil
}

// ConnectLab installs both ends' rules for the providers' lab ports and
// the managers' own.
func (k *Cluster) ConnectLab(labPorts, managerPorts []int) error {
	n, err := inspectNetwork(k.node.String())
	if err != nil {
		return err
	}
	n.labPorts, n.managerPorts, n.prefix = labPorts, managerPorts, "UPGRADELAB-"+strings.ToUpper(k.name)
	if len(n.prefix) > 24 {
		n.prefix = n.prefix[:24] // iptables chain names: 28 characters
	}
	if _, err := k.Run("sh", "-c", n.nodeRules().script([]string{"all", "eth0"})); err != nil {
		return fmt.Errorf("connecting the node to the lab: %w", err)
	}
	if err := runHostScript(n.hostRules().script([]string{n.bridge})); err != nil {
		return fmt.Errorf("connecting the lab to the kind network: %w", err)
	}
	k.network = &n
	return nil
}

// DisconnectLab removes the host's rules (the node's go with it).
func (k *Cluster) DisconnectLab() {
	if k.network != nil {
		_ = runHostScript(k.network.hostRules().removeScript())
		k.network = nil
	}
}

func runHostScript(script string) error {
	cmd := exec.Command("sh", "-c", script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s", err, out.String())
	}
	return nil
}
