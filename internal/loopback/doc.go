// Package loopback hands out 127.0.0.1 ports for listeners that bind them
// later or bind them again: a manager the plane starts, a provider's
// callback endpoint, a BMC or agent that goes offline and comes back, a
// workload cluster's API server that listens only once its first node
// boots. [Ports] and [Addr] pick free ports; [Hold] waits for and holds
// given ports for a program that binds them whatever it is told.
//
// Ports come from [FirstPort] (10300) up to 18999:
//   - below Linux's ephemeral range (32768 up), because a free port there
//     can meanwhile become the source port of any outgoing connection, and
//     scenarios starting at once open hundreds;
//   - below CAPD's in-memory backend, which binds 19000 for debugging and
//     20000 to 30000 for its workload clusters in turn, without checking
//     that a port is free;
//   - above 10248-10260, which the kubelet and the control plane use on a
//     machine that runs Kubernetes.
//
// Being free at the moment of asking is not enough: go test ./... runs
// test binaries at once, and the e2e suite runs parallel processes, so
// another process could see the same unbound port free and bind it
// first. Every upgradelab process therefore opens one registry file in the
// temp folder and locks byte N for port N with open-file-description
// locks. The kernel drops those when the file is closed or the process
// exits, however it exits, so no port stays taken by a dead process. A
// port handed out stays held by this process until it exits. Hold takes
// its locks on a file description of its own, so two runs of CAPD (fixed
// port 19000) never overlap, in one process or several.
package loopback
