package ipa

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/internal/jsonhttp"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// fakeHost records what the agent did to it.
type fakeHost struct {
	mu       sync.Mutex
	did      []string
	metaData map[string]string
}

func (h *fakeHost) Name() string { return "node-0" }
func (h *fakeHost) Inventory() lab.Inventory {
	return lab.Inventory{NICs: []lab.InventoryNIC{{Name: "eno1", MAC: "52:54:00:00:00:01"}}}
}
func (h *fakeHost) log(s string) { h.mu.Lock(); h.did = append(h.did, s); h.mu.Unlock() }
func (h *fakeHost) EraseDisk() error {
	h.log("erase")
	return nil
}
func (h *fakeHost) WriteImage(_ context.Context, url, sum string) (disk.RootID, error) {
	h.log("write " + url + " " + sum)
	return "B", nil
}
func (h *fakeHost) WriteConfigDrive(_ []byte, m map[string]string) error {
	h.mu.Lock()
	h.metaData = m
	h.mu.Unlock()
	return nil
}
func (h *fakeHost) Activate(root disk.RootID, tries int) error {
	h.log("activate " + string(root))
	return nil
}
func (h *fakeHost) Shutdown(context.Context) error { h.log("shutdown"); return nil }

// fakeIronic answers lookups for the fake host's MAC and counts
// heartbeats, keeping the last body.
type fakeIronic struct {
	mu    sync.Mutex
	beats []heartbeat
}

func (f *fakeIronic) handler(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/lookup", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-OpenStack-Ironic-API-Version") != lookupVersion || r.URL.Query().Get("addresses") != "52:54:00:00:00:01" {
			http.Error(w, `{"error_message": "bad lookup"}`, http.StatusBadRequest)
			return
		}
		jsonhttp.Reply(w, http.StatusOK, map[string]any{"node": map[string]any{"uuid": "uuid-0"}, "config": map[string]any{"heartbeat_timeout": 300, "agent_token": "******"}})
	})
	mux.HandleFunc("POST /v1/heartbeat/uuid-0", func(w http.ResponseWriter, r *http.Request) {
		var hb heartbeat
		if err := json.NewDecoder(r.Body).Decode(&hb); err != nil || r.Header.Get("X-OpenStack-Ironic-API-Version") != heartbeatVersion {
			t.Errorf("heartbeat: %v, version %q", err, r.Header.Get("X-OpenStack-Ironic-API-Version"))
		}
		f.mu.Lock()
		f.beats = append(f.beats, hb)
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	})
	return mux
}

func (f *fakeIronic) last() (int, heartbeat) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.beats) == 0 {
		return 0, heartbeat{}
	}
	return len(f.beats), f.beats[len(f.beats)-1]
}

// post sends a command to the agent.
func post(t *testing.T, callback, token string, cmd Command) (int, Result, fault) {
	t.Helper()
	b, _ := json.Marshal(cmd)
	resp, err := http.Post(callback+"/v1/commands/?wait=false&agent_token="+token, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res Result
	var f fault
	data := new(bytes.Buffer)
	_, _ = data.ReadFrom(resp.Body)
	_ = json.Unmarshal(data.Bytes(), &res)
	_ = json.Unmarshal(data.Bytes(), &f)
	return resp.StatusCode, res, f
}

// The agent finds its node and heartbeats with the command line's token;
// Ironic's commands need that token; an asynchronous one answers RUNNING
// at once, and once it is done a heartbeat tells Ironic to look.
func TestTheAgentServesIronicsCommandsWithItsToken(t *testing.T) {
	ironic := &fakeIronic{}
	srv := httptest.NewServer(ironic.handler(t))
	defer srv.Close()
	host := &fakeHost{}
	p, ok := ParseKernelArgs("nofb ipa-api-url=" + srv.URL + "/ ipa-agent-token=tok boot_method=vmedia --")
	if !ok || p.Token != "tok" || p.APIURL != srv.URL {
		t.Fatalf("ParseKernelArgs = %+v, %v", p, ok)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Run(ctx, host, p, func(string, string) {}, func() bool { return true }); close(done) }()
	defer func() { cancel(); <-done }()
	n, hb := waitBeats(t, ironic, 1)
	if hb.AgentToken != "tok" || hb.AgentVersion != Version || !strings.HasPrefix(hb.CallbackURL, "http://127.0.0.1:") {
		t.Fatalf("heartbeat %+v", hb)
	}
	if code, _, f := post(t, hb.CallbackURL, "wrong", Command{Name: "clean.get_clean_steps"}); code != http.StatusUnauthorized || f.String == "" {
		t.Errorf("a command with a wrong token: %d %+v, want 401 with a faultstring", code, f)
	}
	if code, _, f := post(t, hb.CallbackURL, "tok", Command{Name: "nope.nothing"}); code != http.StatusBadRequest || f.String == "" {
		t.Errorf("an unknown command: %d %+v, want 400 with a faultstring", code, f)
	}
	code, res, _ := post(t, hb.CallbackURL, "tok", Command{Name: "clean.get_clean_steps"})
	steps, _ := json.Marshal(res.Outcome)
	if code != http.StatusOK || res.Status != StatusSucceeded || !strings.Contains(string(steps), `"erase_devices_metadata"`) || !strings.Contains(string(steps), "hardware_manager_version") {
		t.Errorf("get_clean_steps: %d %+v", code, res)
	}
	step := map[string]any{"step": "erase_devices_metadata", "interface": "deploy", "priority": 99}
	if code, res, _ := post(t, hb.CallbackURL, "tok", Command{Name: "clean.execute_clean_step", Params: map[string]any{"step": step}}); code != http.StatusOK || res.Status != StatusRunning {
		t.Errorf("execute_clean_step answered %d %+v; want RUNNING at once", code, res)
	}
	waitBeats(t, ironic, n+1)
	if got := lastCommand(t, hb.CallbackURL); got.Status != StatusSucceeded || got.Outcome["clean_step"] == nil || !strings.Contains(strings.Join(host.did, ","), "erase") {
		t.Errorf("after the clean step: last command %+v, host did %v", got, host.did)
	}
}

func waitBeats(t *testing.T, f *fakeIronic, n int) (int, heartbeat) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, hb := f.last()
		if got >= n {
			return got, hb
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d heartbeats, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func lastCommand(t *testing.T, callback string) Result {
	t.Helper()
	resp, err := http.Get(callback + "/v1/commands/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Commands []Result }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Commands) == 0 {
		t.Fatalf("command list: %v, %+v", err, list)
	}
	return list.Commands[len(list.Commands)-1]
}

// write_image takes the sha256 Ironic gives (os_hash or a bare checksum,
// nothing else) and the config drive as Ironic encodes it.
func TestWriteImageTakesTheSHA256AndTheConfigDrive(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for _, c := range []struct {
		info map[string]any
		ok   bool
	}{
		{map[string]any{"os_hash_algo": "sha256", "os_hash_value": sum}, true},
		{map[string]any{"checksum": sum}, true},
		{map[string]any{"os_hash_algo": "md5", "os_hash_value": "d41d8cd98f00b204e9800998ecf8427e"}, false},
		{map[string]any{"checksum": "d41d8cd98f00b204e9800998ecf8427e"}, false},
	} {
		got, err := sha256Of(c.info)
		if (err == nil) != c.ok || (c.ok && got != sum) {
			t.Errorf("sha256Of(%v) = %q, %v", c.info, got, err)
		}
	}
	host := &fakeHost{}
	a := &Agent{host: host}
	args := map[string]any{"image_info": map[string]any{"urls": []any{"http://img/x"}, "os_hash_algo": "sha256", "os_hash_value": sum},
		"configdrive": configDrive(t, map[string]any{"local-hostname": "n0", "public_keys": map[string]any{"k": "v"}})}
	if err := a.writeImage(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	if host.did[0] != "write http://img/x "+sum || host.metaData["local-hostname"] != "n0" || host.metaData["public_keys"] != `{"k":"v"}` {
		t.Errorf("host did %v, meta data %v", host.did, host.metaData)
	}
	if _, _, err := readConfigDrive("not base64!"); err == nil {
		t.Error("a config drive that is not base64 was read")
	}
}

// configDrive encodes meta data as Ironic does: an ISO with
// openstack/latest/meta_data.json, gzipped, base64.
func configDrive(t *testing.T, meta map[string]any) string {
	t.Helper()
	tree := t.TempDir()
	b, _ := json.Marshal(meta)
	if err := os.MkdirAll(filepath.Join(tree, "openstack", "latest"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "openstack", "latest", "meta_data.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(t.TempDir(), "cd.iso")
	if out, err := exec.Command("mkisofs", "-r", "-quiet", "-V", "config-2", "-o", iso, tree).CombinedOutput(); err != nil {
		t.Fatalf("mkisofs: %v\n%s", err, out)
	}
	img, _ := os.ReadFile(iso)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(img)
	_ = zw.Close()
	return base64.StdEncoding.EncodeToString(z.Bytes())
}
