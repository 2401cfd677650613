package ipmi

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/upgradelab/upgradelab/internal/timescale"
)

// authCapsRequest is what ipmitool -I lanplus sends first: Get Channel
// Authentication Capabilities in an IPMI v1.5 session-less packet.
func authCapsRequest() []byte {
	body := []byte{0x81, 0x00, 0x38, 0x8E, 0x04}
	msg := []byte{0x20, netFnApp << 2, 0}
	msg[2] = checksum(msg[:2])
	msg = append(msg, body...)
	msg = append(msg, checksum(body))
	return append([]byte{rmcpVersion, 0, rmcpNoSeq, rmcpClassIPMI, authTypeNone, 0, 0, 0, 0, 0, 0, 0, 0, byte(len(msg))}, msg...)
}

func openSessionRequest(suite byte) []byte {
	auth, integ := byte(0x03), byte(0x04)
	if suite == 3 {
		auth, integ = 0x01, 0x01
	}
	req := []byte{0x00, 0x04, 0, 0, 0xA4, 0xA3, 0xA2, 0xA0,
		0x00, 0, 0, 8, auth, 0, 0, 0,
		0x01, 0, 0, 8, integ, 0, 0, 0,
		0x02, 0, 0, 8, 0x01, 0, 0, 0}
	return rmcpPacket(payloadOpenSession, 0, 0, req, false, nil)
}

func rakp1Request(id uint32, user string) []byte {
	req := []byte{0, 0, 0, 0}
	req = binary.LittleEndian.AppendUint32(req, id)
	req = append(req, bytes.Repeat([]byte{0x5A}, 16)...)
	req = append(req, 0x14, 0, 0, byte(len(user)))
	req = append(req, user...)
	return rmcpPacket(payloadRAKP1, 0, 0, req, false, nil)
}

// FuzzIPMIDatagrams sends arbitrary datagrams through everything a packet
// reaching the port meets (parsePacket, the session set-up, the message
// parser, decryption): none may panic, and the BMC still answers a
// well-formed request afterwards (a malformed packet never wedges it).
func FuzzIPMIDatagrams(f *testing.F) {
	fx := newFixture(f, timescale.Scale(0.01))
	b := fx.bmc
	f.Add(authCapsRequest())
	f.Add(openSessionRequest(3))
	f.Add(openSessionRequest(17))
	f.Add(rakp1Request(1, testUser))
	f.Add(rmcpPacket(payloadRAKP3, 0, 0, make([]byte, 40), false, nil))
	f.Add(rmcpPacket(payloadIPMI, 7, 1, make([]byte, 48), true, func(s []byte) []byte { return make([]byte, 16) }))
	f.Add([]byte{rmcpVersion, 0, rmcpNoSeq, rmcpClassASF, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, dgram []byte) {
		b.handle(dgram)
		// A real open session starts where the fuzzed one left off.
		if out := b.handle(openSessionRequest(17)); len(out) < 4 {
			t.Fatalf("after datagram % x the BMC does not answer an Open Session Request", dgram)
		}
		if out := b.handle(authCapsRequest()); len(out) == 0 {
			t.Fatalf("after datagram % x the BMC does not answer Get Channel Authentication Capabilities", dgram)
		}
		b.mu.Lock()
		b.sessions = map[uint32]*session{} // keep below maxSessions
		b.mu.Unlock()
	})
}

// The session table is bounded: Open Sessions beyond maxSessions are
// refused for lack of resources, not held forever.
func TestOpenSessionsAreBounded(t *testing.T) {
	fx := newFixture(t, timescale.Scale(0.01))
	var last []byte
	for range maxSessions + 1 {
		last = fx.bmc.handle(openSessionRequest(3))
	}
	p, err := parsePacket(last, func(uint32) int { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	if p.payloadType != payloadOpenResp || p.payload[1] != statusNoResources {
		t.Fatalf("open session %d: payload type %#x status %#x, want 11 and insufficient resources", maxSessions+1, p.payloadType, p.payload[1])
	}
}

// A RAKP 1 naming another user is refused (unauthorized name) and the
// half-open session dropped.
func TestRAKP1RefusesAnUnknownUser(t *testing.T) {
	fx := newFixture(t, timescale.Scale(0.01))
	resp, _ := parsePacket(fx.bmc.handle(openSessionRequest(17)), func(uint32) int { return 0 })
	id := binary.LittleEndian.Uint32(resp.payload[8:12])
	out, _ := parsePacket(fx.bmc.handle(rakp1Request(id, "root")), func(uint32) int { return 0 })
	if out.payloadType != payloadRAKP2 || out.payload[1] != statusUnauthorizedName {
		t.Fatalf("RAKP 1 for user root: %#x status %#x", out.payloadType, out.payload[1])
	}
	if n := len(fx.bmc.sessions); n != 0 {
		t.Fatalf("%d sessions left after a refused RAKP 1", n)
	}
}
