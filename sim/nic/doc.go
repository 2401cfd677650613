// Package nic models an Intel i40e (X710 family) port: the NVM image in
// its flash, with a firmware version and an admin-queue API version, and
// what the booted OS's driver, which expects an API version of its own,
// does with it.
//
// [Port] is one port's hardware state. A flash ([Port.BeginFlash],
// [Port.FinishFlash]) leaves the new image pending; [Port.Reset], which
// the lab calls at every power-on, makes it the active one. A power loss
// during a flash ([Port.PowerLoss]) leaves the NIC in recovery mode
// ([FlashRecovery]), which a later complete flash clears.
//
// What the driver does with each pairing is data, not code: [Rules], read
// from fixtures/nic/i40e-rules.yaml with the driver's own log messages.
// [Rules.Evaluate] compares the active image's API version with the
// driver's (from the booted image's manifest): the major newer, same or
// older; with equal majors, the minor newer, same, older or below the
// driver's minimum. The first rule whose conditions all hold decides the
// [Link]: up or down, the rule's name, and the level and message the
// driver logs, with {nvm}, {driver}, {firmware} and {driverVersion}
// filled in. [ParseRules] requires the last rule to have an empty when, so
// every pairing has an outcome. A port being flashed is matched as idle:
// its running firmware serves while it flashes.
//
// [Catalog] is the NVM images a lab can flash
// (fixtures/nic/nvm-images.yaml), each with its modelled flash time. The
// lab (sim/lab) holds the ports and evaluates their links when an OS
// boots; the BMCs flash ports and report their state; the image server
// (sim/image) serves each image's descriptor.
package nic
