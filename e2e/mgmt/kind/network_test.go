package kind

import (
	"slices"
	"strings"
	"testing"
)

func testNetwork() network {
	return network{bridge: "br-0123", gateway: "172.18.0.1", nodeIP: "172.18.0.2", labPorts: []int{12001, 12002}, managerPorts: []int{13001}, prefix: "UPGRADELAB-X"}
}

func rulesText(s natSide) string {
	var lines []string
	for _, r := range s.rules {
		lines = append(lines, r.chain+" "+strings.Join(r.args, " "))
	}
	return strings.Join(lines, "\n")
}

// The node sends lab ports on loopback to the host, except the
// providers' own ports, which it takes from the host instead.
func TestNodeRulesSendLabPortsToTheHost(t *testing.T) {
	got := rulesText(testNetwork().nodeRules())
	for _, want := range []string{
		"UPGRADELAB-X-OUT -d 127.0.0.1/32 -p tcp --dport 12001 -j RETURN",
		// A manager dials its own webhook server on loopback.
		"UPGRADELAB-X-OUT -d 127.0.0.1/32 -p tcp --dport 13001 -j RETURN",
		"UPGRADELAB-X-OUT -d 127.0.0.1/32 -p udp --dport 10300:29999 -j DNAT --to-destination 172.18.0.1",
		"UPGRADELAB-X-POST -s 127.0.0.1/32 -d 172.18.0.1/32 -j MASQUERADE",
		"UPGRADELAB-X-PRE -d 172.18.0.2/32 -p tcp --dport 12002 -j DNAT --to-destination 127.0.0.1",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("node rules lack %q:\n%s", want, got)
		}
	}
	// A provider port must be exempted before the range sends it away.
	if strings.Index(got, "--dport 12002 -j RETURN") > strings.Index(got, "--dport 10300:29999") {
		t.Errorf("the range's DNAT comes before a provider port's RETURN:\n%s", got)
	}
}

func TestHostRulesTakeTheBridgeToLoopback(t *testing.T) {
	got := rulesText(testNetwork().hostRules())
	for _, want := range []string{
		"UPGRADELAB-X-PRE -i br-0123 -d 172.18.0.1/32 -p tcp --dport 10300:29999 -j DNAT --to-destination 127.0.0.1",
		"UPGRADELAB-X-OUT -d 127.0.0.1/32 -p tcp --dport 12001 -j DNAT --to-destination 172.18.0.2",
		"UPGRADELAB-X-POST -s 127.0.0.1/32 -d 172.18.0.2/32 -j MASQUERADE",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("host rules lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "13001") {
		t.Errorf("the host forwards a manager's own port, which only the node uses:\n%s", got)
	}
	if strings.Contains(got, "0.0.0.0") {
		t.Errorf("a host rule opens an address beyond the bridge and loopback:\n%s", got)
	}
}

// The lab's ports must stay clear of the node's own components (etcd
// 2379-2381, the kubelet, scheduler and controller manager up to 10259)
// and of the NodePorts (30000 and up).
func TestLabPortsAvoidTheNodesOwn(t *testing.T) {
	for _, port := range []int{2379, 2380, 2381, 6443, 10248, 10249, 10250, 10256, 10257, 10259, 30000} {
		if port >= labPortLow && port <= labPortHigh {
			t.Errorf("port %d is in the lab range %d-%d", port, labPortLow, labPortHigh)
		}
	}
}

// The script makes each chain once, hooks it once, and its removal
// undoes every hook.
func TestNATScriptHooksEachChainOnce(t *testing.T) {
	side := testNetwork().hostRules()
	script := side.script([]string{"br-0123"})
	for chain, builtin := range side.hooks {
		hook := "iptables -t nat -C " + builtin + " -j " + chain + " 2>/dev/null || iptables -t nat -I " + builtin + " 1 -j " + chain
		if strings.Count(script, hook) != 1 {
			t.Errorf("script hooks %s from %s %d times, want once:\n%s", chain, builtin, strings.Count(script, hook), script)
		}
		if !strings.Contains(side.removeScript(), "iptables -t nat -D "+builtin+" -j "+chain) {
			t.Errorf("removal leaves the hook of %s", chain)
		}
	}
	if !strings.Contains(script, "echo 1 > /proc/sys/net/ipv4/conf/br-0123/route_localnet") {
		t.Errorf("script does not let the bridge carry loopback addresses:\n%s", script)
	}
	keys := sortedKeys(side.hooks)
	if !slices.IsSorted(keys) || len(keys) != 3 {
		t.Errorf("hooks %v", keys)
	}
}
