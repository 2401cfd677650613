// Package ipmi drives a server's BMC over IPMI v2.0 (RMCP+) the way
// Ironic's ipmitool driver does, for BareMetalHosts whose bmc.address is
// ipmi://HOST[:PORT] ([ParseAddress]; BMO's form, port 623 by default). It
// runs ipmitool -I lanplus with the password in a file (-f), so the
// password never shows in a process list; [Client.Close] deletes the file.
//
// [Dial] reads the power state, which opens a session and so checks the
// credentials. [ErrCredentials] covers a wrong user name or password
// (RAKP) and a BMC that does not answer alike: ipmitool tells the two apart
// no better. Each command has ipmitool's own retries within a timeout
// (30 s by default), and a failure Ironic deems retryable (its
// IPMITOOL_RETRYABLE_FAILURES: a lost or busy session, as a lossy
// management network or a BMC that just reset gives) runs the command
// again, three attempts in all.
//
// The operations are the host controller's: PowerOn (a reset when the
// server is on, so it boots again either way), PowerOff, GracefulShutdown
// (ACPI soft off; the caller reads the power state to learn whether it
// happened) and BootOnce with options=efiboot, as Ironic passes it for
// UEFI hosts (without it the BMC boots legacy). IPMI has no virtual media
// and no inventory: such hosts boot the deploy ramdisk from the network
// (chassis bootdev pxe, through package netboot) and are inspected in band.
package ipmi
