package ipmi

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// Network functions (table 5-1).
const (
	netFnChassis   = 0x00
	netFnApp       = 0x06
	netFnTransport = 0x0C
)

// Completion codes (table 5-2).
const (
	ccOK               = 0x00
	ccParamNotSupp     = 0x80 // Set/Get System Boot Options, SOL parameters
	ccPayloadDisabled  = 0x81 // Activate Payload
	ccInvalidCommand   = 0xC1
	ccReqDataLength    = 0xC7
	ccParamOutOfRange  = 0xC9
	ccInvalidField     = 0xCC
	ccNotInState       = 0xD5
	ccInsufficientPriv = 0xD4
	ccUnspecified      = 0xFF
)

// command is one IPMI command the BMC serves: what it needs and how the
// hardware model answers it. Everything else gets Invalid Command (C1).
type command struct {
	name string
	// priv is the least session privilege that may run it; preSession
	// commands are also served outside a session (table G-1).
	priv       byte
	preSession bool
	run        func(b *BMC, s *session, data []byte) (cc byte, resp []byte)
}

// commands is the table of what this BMC implements: the commands
// `ipmitool -I lanplus` sends for session set-up, `chassis power`,
// `chassis bootdev`, `chassis status`, `mc info`, `mc guid`, `mc reset`
// and what Ironic's ipmitool driver sends; and a clear refusal of SOL.
var commands = map[[2]byte]command{
	{netFnApp, 0x01}:       {name: "Get Device ID", priv: privUser, run: (*BMC).getDeviceID},
	{netFnApp, 0x02}:       {name: "Cold Reset", priv: privAdmin, run: (*BMC).coldReset},
	{netFnApp, 0x03}:       {name: "Warm Reset", priv: privAdmin, run: (*BMC).coldReset},
	{netFnApp, 0x08}:       {name: "Get Device GUID", priv: privUser, run: (*BMC).getGUID},
	{netFnApp, 0x37}:       {name: "Get System GUID", priv: privUser, preSession: true, run: (*BMC).getGUID},
	{netFnApp, 0x38}:       {name: "Get Channel Authentication Capabilities", priv: privCallback, preSession: true, run: (*BMC).getChannelAuthCaps},
	{netFnApp, 0x3B}:       {name: "Set Session Privilege Level", priv: privCallback, run: (*BMC).setSessionPriv},
	{netFnApp, 0x3C}:       {name: "Close Session", priv: privCallback, run: (*BMC).closeSession},
	{netFnApp, 0x48}:       {name: "Activate Payload", priv: privUser, run: refuseSOL},
	{netFnApp, 0x54}:       {name: "Get Channel Cipher Suites", priv: privCallback, preSession: true, run: (*BMC).getCipherSuites},
	{netFnTransport, 0x22}: {name: "Get SOL Configuration Parameters", priv: privUser, run: (*BMC).getSOLConfig},
	{netFnChassis, 0x01}:   {name: "Get Chassis Status", priv: privUser, run: (*BMC).getChassisStatus},
	{netFnChassis, 0x02}:   {name: "Chassis Control", priv: privOperator, run: (*BMC).chassisControl},
	{netFnChassis, 0x04}:   {name: "Chassis Identify", priv: privOperator, run: func(*BMC, *session, []byte) (byte, []byte) { return ccOK, nil }},
	{netFnChassis, 0x08}:   {name: "Set System Boot Options", priv: privOperator, run: (*BMC).setBootOptions},
	{netFnChassis, 0x09}:   {name: "Get System Boot Options", priv: privUser, run: (*BMC).getBootOptions},
}

// The channel this BMC's LAN interface is (channel 1, the usual first
// LAN channel); requests may name it or E (this channel).
const lanChannel = 0x01

// Manufacturer ID 0 is "unspecified" in IANA's enterprise numbers, and
// no real vendor's OEM extensions are implied.
const (
	manufacturerID = 0x000000
	productID      = 0x4C55 // "UL"
)

func (b *BMC) getDeviceID(_ *session, _ []byte) (byte, []byte) {
	major, minor := firmwareRevision(b.cfg.FirmwareVersion)
	return ccOK, []byte{
		0x20,         // device ID
		0x01,         // device revision; no SDRs
		major & 0x7F, // firmware revision 1, device available
		minor,        // firmware revision 2, BCD
		0x02,         // IPMI 2.0
		0x9F,         // chassis, bridge, IPMB event receiver/generator, FRU, SEL, sensor device support
		byte(manufacturerID), byte(manufacturerID >> 8), byte(manufacturerID >> 16),
		byte(productID & 0xFF), byte(productID >> 8),
	}
}

// firmwareRevision turns "7.00" into major 7 and BCD minor 0x00.
func firmwareRevision(v string) (major, minor byte) {
	ma, mi, _ := strings.Cut(v, ".")
	m, _ := strconv.Atoi(ma)
	n, _ := strconv.Atoi(mi)
	n %= 100
	return byte(m), byte(n/10<<4 | n%10)
}

func (b *BMC) getGUID(_ *session, _ []byte) (byte, []byte) {
	g := b.guid()
	return ccOK, g[:]
}

// coldReset answers, then reboots the BMC: it stops answering for the
// modelled BMC boot time and forgets every session, as `mc reset cold`
// does on real ones.
func (b *BMC) coldReset(_ *session, _ []byte) (byte, []byte) {
	b.afterReply(func() { b.Reset() })
	return ccOK, nil
}

func (b *BMC) getChannelAuthCaps(_ *session, data []byte) (byte, []byte) {
	if len(data) < 2 {
		return ccReqDataLength, nil
	}
	ch := data[0] & 0x0F
	if ch != 0x0E && ch != lanChannel {
		return ccInvalidField, nil
	}
	if data[1]&0x0F > privAdmin+1 {
		return ccInvalidField, nil
	}
	return ccOK, []byte{
		lanChannel,
		0x80, // IPMI v2.0 extended capabilities; no IPMI v1.5 auth types
		0x04, // non-null user names only; per-message and user-level auth on
		0x02, // channel supports IPMI v2.0 (RMCP+) connections
		0, 0, 0, 0,
	}
}

func (b *BMC) getCipherSuites(_ *session, data []byte) (byte, []byte) {
	if len(data) < 3 {
		return ccReqDataLength, nil
	}
	if ch := data[0] & 0x0F; ch != 0x0E && ch != lanChannel {
		return ccInvalidField, nil
	}
	if data[1]&0x3F != payloadIPMI && data[1]&0x3F != payloadSOL {
		return ccInvalidField, nil
	}
	var records []byte
	for _, s := range cipherSuites {
		if data[2]&0x80 != 0 { // list by cipher suite
			records = append(records, 0xC0, s.id, 0x00|s.auth, 0x40|s.integrity, 0x80|s.conf)
		} else { // list the algorithms supported
			records = append(records, s.auth, 0x40|s.integrity, 0x80|s.conf)
		}
	}
	// 16 bytes of records per list index.
	idx := int(data[2] & 0x3F)
	from := min(idx*16, len(records))
	to := min(from+16, len(records))
	return ccOK, append([]byte{lanChannel}, records[from:to]...)
}

func (b *BMC) setSessionPriv(s *session, data []byte) (byte, []byte) {
	if len(data) < 1 {
		return ccReqDataLength, nil
	}
	want := data[0] & 0x0F
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case want == 0:
	case want > privAdmin:
		return ccInvalidField, nil
	case want > s.role&0x0F:
		// Above what RAKP 1 asked for (table 22-24, code 81h/82h).
		return 0x81, nil
	default:
		s.priv = want
	}
	return ccOK, []byte{s.priv}
}

func (b *BMC) closeSession(s *session, data []byte) (byte, []byte) {
	if len(data) < 4 {
		return ccReqDataLength, nil
	}
	id := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16 | uint32(data[3])<<24
	if id != s.id {
		// Closing another session needs its ID and administrator rights;
		// this BMC only lets a session close itself.
		return 0x87, nil // invalid session ID in request
	}
	b.afterReply(func() { b.drop(id) })
	return ccOK, nil
}

// refuseSOL: serial over LAN is not emulated (there is no console to
// carry); the payload type is disabled, which ipmitool reports.
func refuseSOL(*BMC, *session, []byte) (byte, []byte) { return ccPayloadDisabled, nil }

func (b *BMC) getSOLConfig(_ *session, data []byte) (byte, []byte) {
	if len(data) < 4 {
		return ccReqDataLength, nil
	}
	switch data[1] & 0x7F {
	case 0: // set in progress: set complete
		return ccOK, []byte{0x11, 0x00}
	case 1: // SOL enable: disabled
		return ccOK, []byte{0x11, 0x00}
	}
	return ccParamNotSupp, nil
}

// getChassisStatus reports power from the host model; a failed power
// supply shows as a main power fault (ipmitool: "Main Power Fault: true").
func (b *BMC) getChassisStatus(_ *session, _ []byte) (byte, []byte) {
	st := b.cfg.Host.Status()
	var power byte = 0x00 // restore policy always off: the lab powers nothing on by itself
	if st.Power == lab.PoweredOn {
		power |= 0x01
	}
	if st.PowerSupplyFailed {
		power |= 0x08 | 0x10 // power fault, power control fault
	}
	var last byte
	if b.lastOnByIPMIFlag() {
		last |= 0x10 // last power on by an IPMI command
	}
	return ccOK, []byte{power, last, 0x00, 0x00}
}

// chassisControl: 0 power down (hard), 1 power up, 2 power cycle, 3 hard
// reset, 4 diagnostic interrupt, 5 soft shutdown (ACPI). The BMC answers
// at once; a soft shutdown runs on while the OS shuts down, as the ACPI
// signal does on a real server.
func (b *BMC) chassisControl(_ *session, data []byte) (byte, []byte) {
	if len(data) < 1 {
		return ccReqDataLength, nil
	}
	h := b.cfg.Host
	st := h.Status()
	on := st.Power == lab.PoweredOn
	var err error
	switch data[0] & 0x0F {
	case 0:
		err = h.PowerOff()
	case 1:
		if st.PowerSupplyFailed {
			return ccNotInState, nil
		}
		b.markPowerOnByIPMI()
		err = h.PowerOn()
	case 2, 3:
		if !on {
			// Cycling or resetting a host that is off: real BMCs answer
			// "not supported in present state".
			return ccNotInState, nil
		}
		b.markPowerOnByIPMI()
		err = h.Reset()
	case 4:
		return ccOK, nil // the OS logs the NMI and goes on
	case 5:
		if !on {
			return ccNotInState, nil
		}
		b.background(func(ctx context.Context) {
			if err := h.Shutdown(ctx); err != nil && !errors.Is(err, lab.ErrHung) && ctx.Err() == nil {
				h.Record(lab.EventBMC, "SoftShutdownFailed", err.Error(), map[string]string{"protocol": "ipmi"})
			}
		})
		return ccOK, nil
	default:
		return ccInvalidField, nil
	}
	if err != nil {
		h.Record(lab.EventBMC, "ChassisControlFailed", err.Error(), map[string]string{"protocol": "ipmi"})
		return ccUnspecified, nil
	}
	return ccOK, nil
}

// Boot option parameters (table 28-14) this BMC keeps.
const (
	bootParamSetInProgress = 0
	bootParamServicePart   = 1
	bootParamInfoAck       = 4
	bootParamFlags         = 5
)

// bootDevices maps the boot flags' device selector (data 2, bits 5:2) to
// the lab's boot targets; the rest (diagnostic partition, floppy) are
// refused as out of range.
var bootDevices = map[byte]lab.BootTarget{
	0x1: lab.BootPxe,
	0x2: lab.BootHdd,
	0x5: lab.BootCd,
	0x6: lab.BootBiosSetup,
	0x8: lab.BootCd,  // primary remote media
	0xB: lab.BootHdd, // remote primary hard drive
}

func (b *BMC) setBootOptions(_ *session, data []byte) (byte, []byte) {
	if len(data) < 1 {
		return ccReqDataLength, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch param := data[0] & 0x7F; param {
	case bootParamSetInProgress:
		if len(data) < 2 {
			return ccReqDataLength, nil
		}
		if data[1]&3 == 1 && b.bootSetInProgress {
			return 0x81, nil // set in progress already by another party
		}
		b.bootSetInProgress = data[1]&3 == 1
		return ccOK, nil
	case bootParamServicePart, 2, 3:
		return ccOK, nil
	case bootParamInfoAck:
		if len(data) < 3 {
			return ccReqDataLength, nil
		}
		b.bootInfoAck = (b.bootInfoAck &^ data[1]) | (data[2] & data[1])
		return ccOK, nil
	case bootParamFlags:
		if len(data) < 6 {
			return ccReqDataLength, nil
		}
		o, cc := overrideFromFlags(data[1:6])
		if cc != ccOK {
			return cc, nil
		}
		if err := b.cfg.Host.SetBootOverride(o); err != nil {
			return ccUnspecified, nil
		}
		return ccOK, nil
	default:
		return ccParamNotSupp, nil
	}
}

// overrideFromFlags reads the five boot flag bytes: valid (bit 7),
// persistent (bit 6) and EFI (bit 5) in the first, the device in the
// second.
func overrideFromFlags(f []byte) (lab.BootOverride, byte) {
	if f[0]&0x80 == 0 {
		return lab.BootOverride{Mode: lab.OverrideDisabled}, ccOK
	}
	dev := f[1] >> 2 & 0x0F
	if dev == 0 {
		return lab.BootOverride{Mode: lab.OverrideDisabled}, ccOK
	}
	target, ok := bootDevices[dev]
	if !ok {
		return lab.BootOverride{}, ccParamOutOfRange
	}
	o := lab.BootOverride{Target: target, Mode: lab.OverrideOnce, BootMode: lab.BootModeLegacy}
	if f[0]&0x40 != 0 {
		o.Mode = lab.OverrideContinuous
	}
	if f[0]&0x20 != 0 {
		o.BootMode = lab.BootModeUEFI
	}
	return o, ccOK
}

func flagsFromOverride(o lab.BootOverride) []byte {
	f := make([]byte, 5)
	if o.Mode == lab.OverrideDisabled || o.Target == "" {
		return f
	}
	f[0] = 0x80
	if o.Mode == lab.OverrideContinuous {
		f[0] |= 0x40
	}
	if o.BootMode != lab.BootModeLegacy {
		f[0] |= 0x20
	}
	for dev, t := range bootDevices {
		if t == o.Target && dev <= 0x6 {
			f[1] = dev << 2
		}
	}
	return f
}

func (b *BMC) getBootOptions(_ *session, data []byte) (byte, []byte) {
	if len(data) < 3 {
		return ccReqDataLength, nil
	}
	param := data[0] & 0x7F
	b.mu.Lock()
	inProgress, ack := b.bootSetInProgress, b.bootInfoAck
	b.mu.Unlock()
	head := []byte{0x01, param} // parameter version 1, valid
	switch param {
	case bootParamSetInProgress:
		var v byte
		if inProgress {
			v = 1
		}
		return ccOK, append(head, v)
	case bootParamInfoAck:
		return ccOK, append(head, 0x00, ack)
	case bootParamFlags:
		return ccOK, append(head, flagsFromOverride(b.cfg.Host.Status().Override)...)
	}
	return ccParamNotSupp, nil
}
