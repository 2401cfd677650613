package ipmi

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// RMCP+ session set-up (IPMI v2.0 section 13.17 to 13.31): the console
// opens a session naming its algorithms, then proves it knows the user's
// password (RAKP 1 to 4) by HMACs over both sides' random numbers; both
// sides derive the session integrity key (SIK) and from it the keys of
// every later packet. Nothing secret ever crosses the wire.

// RMCP+ status codes (table 13-15) the set-up answers with.
const (
	statusOK                  = 0x00
	statusNoResources         = 0x01
	statusInvalidSessionID    = 0x02
	statusInvalidAuthAlg      = 0x04
	statusInvalidIntegrityAlg = 0x05
	statusInvalidRole         = 0x09
	statusUnauthorizedRole    = 0x0A
	statusInvalidNameLength   = 0x0C
	statusUnauthorizedName    = 0x0D
	statusInvalidICV          = 0x0F
	statusInvalidConfAlg      = 0x10
	statusIllegalParameter    = 0x12
)

// Privilege levels (table 6-2).
const (
	privCallback = 1
	privUser     = 2
	privOperator = 3
	privAdmin    = 4
)

// maxSessions is how many sessions the BMC holds at once (real ones keep
// 4 to 32); an Open Session beyond it is refused for lack of resources.
const maxSessions = 32

// sessionIdle is how long a session lives without a packet (IPMI's
// default session inactivity timeout is 60 s on most BMCs).
const sessionIdle = 60 * time.Second

type session struct {
	id      uint32 // the managed system's session ID (ours)
	console uint32 // the remote console's session ID
	suite   cipherSuite
	maxPriv byte // the Open Session Request's, 0 for "highest the user has"
	// RAKP state
	rm, rc [16]byte
	role   byte // RAKP 1's requested role byte, as sent (it is hashed)
	user   []byte
	sik    []byte
	k1, k2 []byte
	active bool
	// rakp3, rakp4 are the exchange that activated the session: a console
	// that lost our RAKP 4 sends the same RAKP 3 again and gets it again.
	rakp3, rakp4 []byte
	priv         byte // the session's current privilege
	outSeq       uint32
	inSeq        uint32
	seen         time.Time
}

// openSession answers an Open Session Request: 32 bytes, the message tag,
// the requested maximum privilege, the console's session ID and three
// 8-byte algorithm payloads (authentication, integrity, confidentiality).
func (b *BMC) openSession(req []byte) []byte {
	if len(req) < 32 {
		return openSessionError(req, statusIllegalParameter)
	}
	tag, maxPriv := req[0], req[1]&0x0F
	console := binary.LittleEndian.Uint32(req[4:8])
	alg := func(off int, typ byte) (byte, bool) {
		p := req[off : off+8]
		return p[4] & 0x3F, p[0] == typ && (p[3] == 8 || p[3] == 0)
	}
	auth, ok1 := alg(8, 0x00)
	integ, ok2 := alg(16, 0x01)
	conf, ok3 := alg(24, 0x02)
	if !ok1 || !ok2 || !ok3 || console == 0 {
		return openSessionError(req, statusIllegalParameter)
	}
	if maxPriv > privAdmin {
		return openSessionError(req, statusInvalidRole)
	}
	suite, status := suiteFor(auth, integ, conf)
	if status != statusOK {
		return openSessionError(req, status)
	}
	b.mu.Lock()
	b.expireLocked()
	if len(b.sessions) >= maxSessions {
		b.mu.Unlock()
		return openSessionError(req, statusNoResources)
	}
	s := &session{console: console, suite: suite, maxPriv: maxPriv, seen: time.Now()}
	for s.id == 0 || b.sessions[s.id] != nil {
		var id [4]byte
		rand.Read(id[:])
		s.id = binary.LittleEndian.Uint32(id[:])
	}
	b.sessions[s.id] = s
	b.mu.Unlock()

	out := []byte{tag, statusOK, maxPriv, 0}
	out = binary.LittleEndian.AppendUint32(out, console)
	out = binary.LittleEndian.AppendUint32(out, s.id)
	out = append(out, 0x00, 0, 0, 8, suite.auth, 0, 0, 0)
	out = append(out, 0x01, 0, 0, 8, suite.integrity, 0, 0, 0)
	out = append(out, 0x02, 0, 0, 8, suite.conf, 0, 0, 0)
	return out
}

func openSessionError(req []byte, status byte) []byte {
	out := []byte{0, status, 0, 0, 0, 0, 0, 0}
	if len(req) > 0 {
		out[0] = req[0]
	}
	if len(req) >= 8 {
		copy(out[4:8], req[4:8])
	}
	return out
}

// rakp1 answers RAKP Message 1 with RAKP Message 2: the console's random
// number and the user it logs in as, answered with ours, the system GUID
// and the HMAC (keyed by the user's password) over both sessions' IDs,
// both random numbers, the GUID, the role and the name.
func (b *BMC) rakp1(req []byte) []byte {
	fail := func(status byte, console uint32) []byte { return rakpError(req, status, console) }
	if len(req) < 28 {
		return fail(statusIllegalParameter, 0)
	}
	tag, id := req[0], binary.LittleEndian.Uint32(req[4:8])
	b.mu.Lock()
	s := b.sessions[id]
	b.mu.Unlock()
	if s == nil || s.active {
		return fail(statusInvalidSessionID, 0)
	}
	role, ulen := req[24], int(req[27])
	if ulen > 16 || len(req) < 28+ulen {
		return fail(statusInvalidNameLength, s.console)
	}
	user := req[28 : 28+ulen]
	want := role & 0x0F
	switch {
	case want == 0 || want > privAdmin+1:
		return fail(statusInvalidRole, s.console)
	case want > privAdmin || (s.maxPriv != 0 && want > s.maxPriv):
		return fail(statusUnauthorizedRole, s.console)
	case ulen == 0 || !hmac.Equal(user, []byte(b.cfg.Username)):
		// Null and anonymous user names are disabled, as on any BMC set
		// up with a named account.
		b.drop(id)
		return fail(statusUnauthorizedName, s.console)
	}
	b.mu.Lock()
	copy(s.rm[:], req[8:24])
	rand.Read(s.rc[:])
	s.role, s.user = role, bytes.Clone(user)
	s.seen = time.Now()
	b.mu.Unlock()

	guid := b.guid()
	out := []byte{tag, statusOK, 0, 0}
	out = binary.LittleEndian.AppendUint32(out, s.console)
	out = append(out, s.rc[:]...)
	out = append(out, guid[:]...)
	return append(out, s.suite.hmac([]byte(b.cfg.Password),
		le32(s.console), le32(s.id), s.rm[:], s.rc[:], guid[:], []byte{s.role, byte(len(s.user))}, s.user)...)
}

// rakp3 checks RAKP Message 3 (the console's HMAC over our random number,
// its session ID, the role and the name) and answers RAKP Message 4, the
// integrity check over the console's random number, our session ID and
// the GUID keyed by the SIK. A wrong password fails here.
func (b *BMC) rakp3(req []byte) []byte {
	fail := func(status byte, console uint32) []byte { return rakpError(req, status, console) }
	if len(req) < 8 {
		return fail(statusIllegalParameter, 0)
	}
	tag, status, id := req[0], req[1], binary.LittleEndian.Uint32(req[4:8])
	b.mu.Lock()
	s := b.sessions[id]
	var again []byte
	if s != nil && s.active && bytes.Equal(req, s.rakp3) {
		again = s.rakp4
	}
	b.mu.Unlock()
	if again != nil {
		return again
	}
	if s == nil || s.active || s.user == nil {
		return fail(statusInvalidSessionID, 0)
	}
	if status != statusOK {
		// The console gave up (it found our RAKP 2 HMAC wrong).
		b.drop(id)
		return fail(status, s.console)
	}
	key := []byte(b.cfg.Password)
	want := s.suite.hmac(key, s.rc[:], le32(s.console), []byte{s.role, byte(len(s.user))}, s.user)
	if !hmac.Equal(req[8:], want) {
		b.drop(id)
		b.cfg.Host.Record(lab.EventBMC, "IPMIAuthenticationFailed", "RAKP 3: wrong password for user "+string(s.user), map[string]string{"protocol": "ipmi"})
		return fail(statusInvalidICV, s.console)
	}
	guid := b.guid()
	b.mu.Lock()
	s.sik = s.suite.hmac(key, s.rm[:], s.rc[:], []byte{s.role, byte(len(s.user))}, s.user)
	s.k1, s.k2 = s.suite.keys(s.sik)
	s.active, s.priv = true, min(s.role&0x0F, privUser) // raised by Set Session Privilege Level
	s.seen = time.Now()
	icv := s.suite.hmac(s.sik, s.rm[:], le32(s.id), guid[:])[:s.suite.rakp4Len]
	out := []byte{tag, statusOK, 0, 0}
	out = binary.LittleEndian.AppendUint32(out, s.console)
	out = append(out, icv...)
	s.rakp3, s.rakp4 = bytes.Clone(req), out
	b.mu.Unlock()
	return out
}

// rakpError is a RAKP 2 or 4 that only reports status: the request's
// message tag, the status, the console's session ID.
func rakpError(req []byte, status byte, console uint32) []byte {
	out := []byte{0, status, 0, 0}
	if len(req) > 0 {
		out[0] = req[0]
	}
	return binary.LittleEndian.AppendUint32(out, console)
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func (b *BMC) drop(id uint32) {
	b.mu.Lock()
	delete(b.sessions, id)
	b.mu.Unlock()
}

func (b *BMC) expireLocked() {
	for id, s := range b.sessions {
		if time.Since(s.seen) > sessionIdle {
			delete(b.sessions, id)
		}
	}
}
