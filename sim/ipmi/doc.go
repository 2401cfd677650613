// Package ipmi emulates the IPMI v2.0 over LAN interface (RMCP+) of a lab
// host's BMC, for ipmitool, Ironic's ipmitool driver and the provider
// under test. Like the Redfish service (sim/bmc) it is a fake standing
// for BMC firmware and acts only through the host's hardware model
// (sim/lab.Host); both can serve one host at once, and sim/bmc's
// StartFleet starts this one beside it when the lab file's bmc.protocols
// asks, recording its address in lab.json as ipmi.
//
// [Start] listens on its own UDP port on loopback. The files follow the
// protocol's layers:
//
//   - packet.go: RMCP, the IPMI v1.5 session-less and RMCP+ session
//     headers and trailer, and IPMI messages with their checksums.
//   - crypto.go: cipher suites 3 and 17 only (RAKP-HMAC-SHA1 or -SHA256,
//     HMAC-SHA1-96 or HMAC-SHA256-128, AES-CBC-128); suites without
//     integrity or confidentiality are not offered, as real BMCs ship
//     them disabled. K1 and K2 come from 20-byte constants even with
//     SHA-256: ipmitool and OpenBMC do so, and a BMC using 32 bytes fails
//     every packet after RAKP with them.
//   - session.go: Open Session and RAKP 1 to 4. A wrong user name is
//     refused at RAKP 2, a wrong password at RAKP 3; a repeated RAKP 3
//     gets the same RAKP 4 (the console may have lost it). At most 32
//     sessions; idle ones expire after 60 s. A session starts at User
//     privilege and Set Session Privilege Level raises it.
//   - commands.go: the command table, each with the privilege it needs:
//     channel authentication capabilities and cipher suites (also outside
//     a session), session privilege and close, Get Device ID and the
//     GUIDs, Cold/Warm Reset, Get Chassis Status (a dead supply is a main
//     power fault), Chassis Control, and System Boot Options parameters
//     0, 4 and 5. Serial over LAN is refused as a disabled payload;
//     anything else is Invalid Command.
//   - server.go: the socket, per-session integrity and decryption, replay
//     checks and faults.
//
// The boot flags' EFI bit sets the override's boot mode; without it the
// override is Legacy, and the lab's EFI-only images do not boot. So
// ipmitool's chassis bootdev without options=efiboot fails as it would on
// a UEFI-only server. The persistent bit makes the override Continuous.
//
// A datagram that is malformed or fails authentication gets no answer, as
// on a real BMC: the console times out. [BMC.Reset] (mc reset, or a
// fault) and [BMC.Unreachable] forget every session and leave the port
// silent for the down time; the host's power is untouched. A reset also
// calls Config.OnReboot, which takes the host's Redfish service down for
// the same time. [BMC.SetFaults] adds latency and datagram loss.
//
// The judge is ipmitool from Debian, unmodified, over lanplus
// (ipmitool_test.go), not this package's reading of the specification.
// FuzzIPMIDatagrams sends arbitrary datagrams through everything a packet
// meets (parsing, session set-up, decryption) and checks the BMC still
// answers afterwards.
package ipmi
