package workload

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/upgradelab/upgradelab/internal/vocab"
)

// Where a workload cluster's data lives. A kubeadm control plane is
// stacked: every control-plane host runs an etcd member whose data is on
// that host's disk, and its kube-apiserver talks to that member. So what
// the cluster's API can do depends on its members' states, and that is
// decided here, as data: each member is in one MemberState, the members
// together give the cluster one Health (health), and each Health has one
// row of behaviour (behaviours). Tests check the tables row by row.

// MemberState is one etcd member as its host leaves it.
type MemberState string

const (
	// MemberRunning: the host is booted and its etcd static pod runs.
	MemberRunning MemberState = "running"
	// MemberStopped: the host is off or rebooting; the data is on its
	// disk, and the member catches up from the others when it starts.
	MemberStopped MemberState = "stopped"
	// MemberWiped: the host's disk was erased (cleaned, reset, reimaged)
	// while the member still counted: its copy of the data is gone.
	MemberWiped MemberState = "wiped"
	// MemberRemoved: KCP removed the member (MemberRemove) before its host
	// went; it no longer votes.
	MemberRemoved MemberState = "removed"
)

// Health is what a cluster's members together can do.
type Health string

const (
	// HealthNoMembers: before kubeadm init made the first member.
	HealthNoMembers Health = vocab.EtcdHealthNoMembers
	// HealthQuorum: a majority of the voting members run.
	HealthQuorum Health = vocab.EtcdHealthQuorum
	// HealthNoQuorum: some voting member still has the data, but a
	// majority do not run.
	HealthNoQuorum Health = vocab.EtcdHealthNoQuorum
	// HealthDataLost: every voting member's data is gone.
	HealthDataLost Health = vocab.EtcdHealthDataLost
)

// health derives a cluster's Health from its members: voting members
// are those KCP has not removed; quorum is more than half of them
// running.
func health(members map[string]MemberState) Health {
	voting, running, withData := 0, 0, 0
	for _, st := range members {
		switch st {
		case MemberRemoved:
			continue
		case MemberRunning:
			running++
			withData++
		case MemberStopped:
			withData++
		}
		voting++
	}
	switch {
	case voting == 0 && len(members) == 0:
		return HealthNoMembers
	case withData == 0:
		return HealthDataLost
	case running > voting/2:
		return HealthQuorum
	default:
		return HealthNoQuorum
	}
}

// Behaviour is what the API does in one Health.
type Behaviour struct {
	// Reads and Writes: nil serves them; otherwise the error answered,
	// as kube-apiserver passes etcd's on (an HTTP 500 whose message is
	// etcd's).
	Reads, Writes error
	// Erase: the cluster's objects are gone (entering this Health
	// empties the store, once).
	Erase bool
}

var (
	errTimedOut = errors.New("etcdserver: request timed out")
	errNoLeader = errors.New("etcdserver: no leader")
)

// behaviours is the table: one row per Health.
//
//   - no members: the objects kubeadm init will find (namespaces made
//     with the cluster) are served; no API server listens yet anyway.
//   - quorum: everything is served; a member that rejoins catches up.
//   - no quorum: a linearizable read and every write time out, as they do
//     against a real etcd that cannot reach a majority (kube-apiserver's
//     GETs and consistent LISTs are quorum reads; a watch already open
//     stays open and sees nothing, because nothing changes).
//   - data lost: no member has the data: the objects are gone, and with
//     no member able to lead, nothing is served.
var behaviours = map[Health]Behaviour{
	HealthNoMembers: {},
	HealthQuorum:    {},
	HealthNoQuorum:  {Reads: errTimedOut, Writes: errTimedOut},
	HealthDataLost:  {Reads: errNoLeader, Writes: errNoLeader, Erase: true},
}

// apiError is the API's answer for an etcd error: kube-apiserver turns
// it into a 500 whose message is etcd's.
func apiError(err error) error {
	return apierrors.NewInternalError(err)
}

// describe lists the members as "node=state" for events and errors.
func describe(members map[string]MemberState) string {
	parts := make([]string, 0, len(members))
	for node, st := range members {
		parts = append(parts, fmt.Sprintf("%s=%s", node, st))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
