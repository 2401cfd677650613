package ipmi

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The packet layers of IPMI over LAN (IPMI v2.0 rev 1.1, sections 13.5
// to 13.8), outermost first:
//
//	RMCP header            version 06, reserved, sequence FF, class 07 (IPMI)
//	session header         IPMI v1.5 (auth type 00, pre-session only) or
//	                       RMCP+ (auth type 06): payload type, session ID,
//	                       sequence, payload length
//	payload                an IPMI message, or an RMCP+ session set-up
//	                       message (Open Session, RAKP 1-4); AES-CBC-128
//	                       encrypted when the payload type says so
//	session trailer        integrity pad, pad length, next header 07 and
//	                       the integrity check value, on authenticated
//	                       RMCP+ packets
//
// parsePacket reads the two outer layers and leaves the payload to the
// session; it is what `make fuzz` hammers, since every datagram that
// reaches the port goes through it.

const (
	rmcpVersion   = 0x06
	rmcpNoSeq     = 0xFF
	rmcpClassIPMI = 0x07
	rmcpClassASF  = 0x06

	authTypeNone = 0x00 // IPMI v1.5 session header, no authentication
	authTypeRMCP = 0x06 // RMCP+ (IPMI v2.0) session header

	payloadIPMI        = 0x00
	payloadSOL         = 0x01
	payloadOEM         = 0x02
	payloadOpenSession = 0x10
	payloadOpenResp    = 0x11
	payloadRAKP1       = 0x12
	payloadRAKP2       = 0x13
	payloadRAKP3       = 0x14
	payloadRAKP4       = 0x15

	payloadEncrypted     = 0x80
	payloadAuthenticated = 0x40
	nextHeaderIPMI       = 0x07
)

// maxDatagram bounds what one read takes; IPMI over LAN packets are well
// below it (an RMCP+ payload length is 16 bits, real ones stay under 300).
const maxDatagram = 1024

// packet is one parsed datagram's outer layers.
type packet struct {
	// v15 is set for an IPMI v1.5 session header (pre-session commands).
	v15         bool
	payloadType byte // bits 5:0 of the RMCP+ payload type
	encrypted   bool
	authed      bool
	sessionID   uint32
	seq         uint32
	payload     []byte
	// signed is the range the integrity check value covers (auth type
	// through next header), mac the value sent; both only when authed.
	signed, mac []byte
}

var errShort = errors.New("truncated packet")

// parsePacket reads one datagram. macLen is the integrity check value's
// length the session in use expects (0 when it does not matter yet): an
// authenticated packet carries it last, after the pad and next header.
func parsePacket(b []byte, macLen func(sessionID uint32) int) (packet, error) {
	var p packet
	if len(b) < 4 {
		return p, errShort
	}
	if b[0] != rmcpVersion || b[2] != rmcpNoSeq {
		return p, fmt.Errorf("RMCP header % x: want version 06 and sequence FF", b[:4])
	}
	if b[3]&0x1F != rmcpClassIPMI {
		return p, fmt.Errorf("RMCP class %#02x: only IPMI (07) is served (no ASF ping)", b[3]&0x1F)
	}
	s := b[4:]
	if len(s) < 1 {
		return p, errShort
	}
	switch s[0] {
	case authTypeNone:
		// auth type, sequence (4), session ID (4), length (1), message
		if len(s) < 10 {
			return p, errShort
		}
		p.v15 = true
		p.seq = binary.LittleEndian.Uint32(s[1:5])
		p.sessionID = binary.LittleEndian.Uint32(s[5:9])
		n := int(s[9])
		if len(s) < 10+n {
			return p, errShort
		}
		p.payload = s[10 : 10+n]
		p.payloadType = payloadIPMI
		if p.sessionID != 0 {
			return p, errors.New("IPMI v1.5 sessions are not offered: use RMCP+ (ipmitool -I lanplus)")
		}
		return p, nil
	case authTypeRMCP:
	default:
		return p, fmt.Errorf("auth type %#02x: only none (00, pre-session) and RMCP+ (06) are offered", s[0])
	}
	// auth type, payload type, session ID (4), sequence (4), length (2)
	if len(s) < 12 {
		return p, errShort
	}
	pt := s[1]
	p.encrypted, p.authed, p.payloadType = pt&payloadEncrypted != 0, pt&payloadAuthenticated != 0, pt&0x3F
	if p.payloadType == payloadOEM {
		return p, errors.New("OEM explicit payloads are not supported")
	}
	p.sessionID = binary.LittleEndian.Uint32(s[2:6])
	p.seq = binary.LittleEndian.Uint32(s[6:10])
	n := int(binary.LittleEndian.Uint16(s[10:12]))
	if len(s) < 12+n {
		return p, errShort
	}
	p.payload = s[12 : 12+n]
	if !p.authed {
		return p, nil
	}
	if p.sessionID == 0 {
		return p, errors.New("an authenticated packet outside a session")
	}
	ml := macLen(p.sessionID)
	if ml == 0 {
		return p, fmt.Errorf("session %#08x: no integrity algorithm (unknown session)", p.sessionID)
	}
	// trailer: pad (0-3 bytes of FF), pad length, next header, mac
	rest := s[12+n:]
	if len(rest) < 2+ml {
		return p, errShort
	}
	pad := int(rest[len(rest)-ml-2])
	if pad > 3 || len(rest) != pad+2+ml {
		return p, fmt.Errorf("session trailer: pad length %d with %d trailer bytes", pad, len(rest))
	}
	if rest[len(rest)-ml-1] != nextHeaderIPMI {
		return p, fmt.Errorf("session trailer: next header %#02x, want 07", rest[len(rest)-ml-1])
	}
	p.signed = s[:len(s)-ml]
	p.mac = s[len(s)-ml:]
	return p, nil
}

// rmcpHeader starts every datagram this BMC sends.
var rmcpHeader = []byte{rmcpVersion, 0x00, rmcpNoSeq, rmcpClassIPMI}

// v15Packet frames a session-less IPMI v1.5 reply.
func v15Packet(msg []byte) []byte {
	out := append([]byte{}, rmcpHeader...)
	out = append(out, authTypeNone, 0, 0, 0, 0, 0, 0, 0, 0, byte(len(msg)))
	return append(out, msg...)
}

// rmcpPacket frames an RMCP+ packet; sign, when set, makes it
// authenticated (pad, pad length, next header, then sign's MAC over all
// from the auth type on).
func rmcpPacket(payloadType byte, sessionID, seq uint32, payload []byte, encrypted bool, sign func([]byte) []byte) []byte {
	pt := payloadType
	if encrypted {
		pt |= payloadEncrypted
	}
	if sign != nil {
		pt |= payloadAuthenticated
	}
	s := []byte{authTypeRMCP, pt}
	s = binary.LittleEndian.AppendUint32(s, sessionID)
	s = binary.LittleEndian.AppendUint32(s, seq)
	s = binary.LittleEndian.AppendUint16(s, uint16(len(payload)))
	s = append(s, payload...)
	if sign != nil {
		pad := (4 - (len(s)+2)%4) % 4
		for range pad {
			s = append(s, 0xFF)
		}
		s = append(s, byte(pad), nextHeaderIPMI)
		s = append(s, sign(s)...)
	}
	return append(append([]byte{}, rmcpHeader...), s...)
}

// message is one IPMI request (section 13.8: rsAddr, netFn/rsLUN,
// checksum, rqAddr, rqSeq/rqLUN, cmd, data, checksum).
type message struct {
	rsAddr, rqAddr byte
	netFn, cmd     byte
	rsLUN, rqLUN   byte
	rqSeq          byte
	data           []byte
}

func checksum(b []byte) byte {
	var sum byte
	for _, c := range b {
		sum += c
	}
	return -sum
}

// parseMessage checks both checksums of an IPMI request.
func parseMessage(b []byte) (message, error) {
	var m message
	if len(b) < 7 {
		return m, fmt.Errorf("IPMI message of %d bytes: want at least 7", len(b))
	}
	if checksum(b[:2]) != b[2] {
		return m, errors.New("IPMI message: header checksum mismatch")
	}
	if checksum(b[3:len(b)-1]) != b[len(b)-1] {
		return m, errors.New("IPMI message: data checksum mismatch")
	}
	m.rsAddr, m.netFn, m.rsLUN = b[0], b[1]>>2, b[1]&3
	m.rqAddr, m.rqSeq, m.rqLUN = b[3], b[4]>>2, b[4]&3
	m.cmd = b[5]
	m.data = b[6 : len(b)-1]
	if m.netFn&1 != 0 {
		return m, fmt.Errorf("IPMI message: netFn %#02x is a response", m.netFn)
	}
	return m, nil
}

// reply frames the response to m with completion code cc.
func (m message) reply(cc byte, data []byte) []byte {
	h := []byte{m.rqAddr, (m.netFn|1)<<2 | m.rqLUN}
	out := append(append([]byte{}, h...), checksum(h))
	body := append([]byte{m.rsAddr, m.rqSeq<<2 | m.rsLUN, m.cmd, cc}, data...)
	out = append(out, body...)
	return append(out, checksum(body))
}
