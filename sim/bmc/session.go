package bmc

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

func (b *BMC) getSessionService(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":      "/redfish/v1/SessionService",
		"@odata.type":    "#SessionService.v1_1_9.SessionService",
		"Id":             "SessionService",
		"Name":           "Session Service",
		"ServiceEnabled": true,
		"SessionTimeout": 1800,
		"Sessions":       odataID(strings.TrimSuffix(sessionsPath, "/")),
	})
}

// postSession logs in: the token comes back in X-Auth-Token and the
// session's URL in Location. Wrong credentials change nothing.
func (b *BMC) postSession(w http.ResponseWriter, r *http.Request) {
	var p struct {
		UserName string `json:"UserName"`
		Password string `json:"Password"`
	}
	if !decode(w, r, &p) {
		return
	}
	if !b.credentialsMatch(p.UserName, p.Password) {
		writeError(w, http.StatusUnauthorized, msgNoValidSession, "The user name or password is not valid.", "")
		return
	}
	buf := make([]byte, 24)
	rand.Read(buf)
	token := hex.EncodeToString(buf)
	b.mu.Lock()
	b.nextID++
	s := session{ID: strconv.Itoa(b.nextID), Username: p.UserName, Created: time.Now()}
	b.sessions[token] = s
	b.mu.Unlock()
	w.Header().Set("X-Auth-Token", token)
	w.Header().Set("Location", sessionsPath+s.ID)
	writeJSON(w, http.StatusCreated, sessionBody(s))
}

func sessionBody(s session) map[string]any {
	return map[string]any{
		"@odata.id": sessionsPath + s.ID, "@odata.type": "#Session.v1_7_0.Session",
		"Id": s.ID, "Name": "User Session", "UserName": s.Username,
		"CreatedTime": s.Created.UTC().Format(time.RFC3339),
	}
}

func (b *BMC) getSessions(w http.ResponseWriter, _ *http.Request) {
	b.mu.Lock()
	var members []string
	for _, s := range b.sessions {
		members = append(members, sessionsPath+s.ID)
	}
	b.mu.Unlock()
	writeJSON(w, http.StatusOK, collection(strings.TrimSuffix(sessionsPath, "/"), "#SessionCollection.SessionCollection", "Sessions", members...))
}

func (b *BMC) lookupSession(id string) (string, session, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for token, s := range b.sessions {
		if s.ID == id {
			return token, s, true
		}
	}
	return "", session{}, false
}

func (b *BMC) getSession(w http.ResponseWriter, r *http.Request) {
	_, s, ok := b.lookupSession(r.PathValue("session"))
	if !ok {
		notFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, sessionBody(s))
}

// deleteSession logs out; the token stops working at once.
func (b *BMC) deleteSession(w http.ResponseWriter, r *http.Request) {
	token, _, ok := b.lookupSession(r.PathValue("session"))
	if !ok {
		notFound(w, r)
		return
	}
	b.mu.Lock()
	delete(b.sessions, token)
	b.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (b *BMC) getAccountService(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": "/redfish/v1/AccountService", "@odata.type": "#AccountService.v1_15_0.AccountService",
		"Id": "AccountService", "Name": "Account Service", "ServiceEnabled": true,
		"MinPasswordLength": 8, "AccountLockoutThreshold": 0,
		"Oem": map[string]any{"Upgradelab": map[string]any{"Accounts": []string{b.cfg.Username}}},
	})
}
