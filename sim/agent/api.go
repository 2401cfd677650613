package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/upgradelab/upgradelab/internal/jsonhttp"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// API is the agent's management endpoint, what an OS update agent offers
// to the in-place extension and to reset-based provisioners. Only clients
// with a certificate from the lab CA get in (mutual TLS).
type API struct {
	agent *Agent
	addr  string
	tls   *tls.Config
	mux   *http.ServeMux

	mu     sync.Mutex
	srv    *http.Server
	closed bool
}

// ServeAPI listens on addr (e.g. 127.0.0.1:0) with the host's serving
// certificate and requires client certificates signed by clientCAs.
func ServeAPI(a *Agent, cert tls.Certificate, clientCAs *x509.CertPool, addr string) (*API, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", a.host.Name(), err)
	}
	mux := http.NewServeMux()
	api := &API{agent: a, addr: l.Addr().String(), mux: mux}
	mux.HandleFunc("GET "+agentv1.PathStatus, api.status)
	mux.HandleFunc("GET "+agentv1.PathInventory, api.inventory)
	mux.HandleFunc("POST "+agentv1.PathStage, api.stage)
	mux.HandleFunc("POST "+agentv1.PathActivate, api.activate)
	mux.HandleFunc("POST "+agentv1.PathRollback, api.rollback)
	mux.HandleFunc("GET "+agentv1.PathEtc, api.getEtc)
	mux.HandleFunc("PUT "+agentv1.PathEtc, api.putEtc)
	mux.HandleFunc("POST "+agentv1.PathHealth, api.health)
	mux.HandleFunc("POST "+agentv1.PathReset, api.reset)
	mux.HandleFunc("PUT "+agentv1.PathConfigDrive, api.putConfigDrive)
	mux.HandleFunc("POST "+agentv1.PathClean, api.clean)
	mux.HandleFunc("POST "+agentv1.PathReboot, api.reboot)
	mux.HandleFunc("POST "+agentv1.PathKubeadmUpgrade, api.kubeadmUpgrade)
	mux.HandleFunc("PUT "+agentv1.PathFiles, api.putFiles)
	mux.HandleFunc("GET "+agentv1.PathPersistent, api.getPersistent)
	mux.HandleFunc("PUT "+agentv1.PathPersistent+"/{name}", api.putPersistent)
	api.tls = &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: clientCAs,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}
	api.serve(l)
	a.mu.Lock()
	a.apiURL = api.URL()
	a.mu.Unlock()
	return api, nil
}

// URL is the API's base URL.
func (api *API) URL() string { return "https://" + api.addr }

func (api *API) serve(l net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(api.answer), ReadHeaderTimeout: 10 * time.Second}
	api.mu.Lock()
	api.srv = srv
	api.mu.Unlock()
	go srv.Serve(tls.NewListener(l, api.tls))
}

// answer serves a request, unless the host's OS is hung: then the
// connection drops with no answer, as one to a frozen kernel times out.
func (api *API) answer(w http.ResponseWriter, r *http.Request) {
	if api.agent.host.Status().Phase == lab.PhaseHung {
		panic(http.ErrAbortHandler)
	}
	api.mux.ServeHTTP(w, r)
}

// Close stops the API.
func (api *API) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	api.mu.Lock()
	srv := api.srv
	api.closed = true
	api.mu.Unlock()
	return srv.Shutdown(ctx)
}

// Crash is the agent process dying: every connection drops at once (a
// call in progress, such as an image write, is cut off and its slot left
// unusable), nothing answers, and after down (real time) the service
// manager has started it again on the same address. The host's OS, its
// kubelet and its disk stay as they are.
func (api *API) Crash(down time.Duration) {
	api.mu.Lock()
	srv := api.srv
	api.mu.Unlock()
	srv.Close()
	api.agent.record("AgentCrashed", fmt.Sprintf("the agent's API stopped; back in %s", down))
	time.AfterFunc(down, func() {
		api.mu.Lock()
		closed := api.closed
		api.mu.Unlock()
		if closed {
			return
		}
		l, err := net.Listen("tcp", api.addr)
		if err != nil {
			api.agent.record("AgentRestartFailed", err.Error())
			return
		}
		api.serve(l)
		api.agent.record("AgentRestarted", "the agent's API answers again")
	})
}

func replyErr(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, lab.ErrNotRunning), errors.Is(err, disk.ErrNotWritten), errors.Is(err, disk.ErrNotBooted),
		errors.Is(err, disk.ErrNoFallback), errors.Is(err, disk.ErrNoSuchRoot), errors.Is(err, disk.ErrWriteUnderWay):
		status = http.StatusConflict
	case errors.Is(err, disk.ErrNoSpace):
		status = http.StatusInsufficientStorage
	case errors.Is(err, jsonhttp.ErrBadRequest), errors.Is(err, disk.ErrEtcPathBad):
		status = http.StatusBadRequest
	}
	jsonhttp.Reply(w, status, agentv1.Error{Error: err.Error()})
}

func (api *API) status(w http.ResponseWriter, _ *http.Request) {
	s := api.agent.host.Status()
	st := agentv1.Status{Host: s.Name, Phase: agentv1.Phase(s.Phase), OS: WireOS(s.OS, time.Now()), Images: s.Disk.Images().Wire()}
	api.agent.mu.Lock()
	if api.agent.joined != nil {
		st.Node, st.Cluster = api.agent.joined.NodeName, api.agent.cluster
	}
	st.Kubeadm = api.agent.lastKubeadm.status()
	st.Files = fileSums(api.agent.files)
	api.agent.mu.Unlock()
	jsonhttp.Reply(w, http.StatusOK, st)
}

// inventory answers what the running OS finds of the hardware.
func (api *API) inventory(w http.ResponseWriter, _ *http.Request) {
	in := api.agent.host.Inventory()
	out := agentv1.Inventory{Hostname: in.Hostname, CPUs: in.CPUs, MemoryMiB: in.MemoryMiB, DiskGiB: in.DiskGiB, Serial: in.Serial}
	for _, n := range in.NICs {
		out.NICs = append(out.NICs, agentv1.InventoryNIC{Name: n.Name, MAC: n.MAC, IP: n.IP, Firmware: n.Firmware, Up: n.Up})
	}
	jsonhttp.Reply(w, http.StatusOK, out)
}

func (api *API) stage(w http.ResponseWriter, r *http.Request) {
	var req agentv1.StageRequest
	if err := jsonhttp.Decode(r, &req); err != nil {
		replyErr(w, err)
		return
	}
	if err := req.Check(); err != nil {
		replyErr(w, fmt.Errorf("%w: %w", jsonhttp.ErrBadRequest, err))
		return
	}
	root, err := api.agent.host.WriteImage(r.Context(), req.URL, req.SHA256)
	if err != nil {
		replyErr(w, err)
		return
	}
	jsonhttp.Reply(w, http.StatusOK, agentv1.StageResult{Root: agentv1.RootID(root)})
}

func (api *API) activate(w http.ResponseWriter, r *http.Request) {
	var req agentv1.ActivateRequest
	if err := jsonhttp.Decode(r, &req); err != nil {
		replyErr(w, err)
		return
	}
	if req.Root == "" {
		replyErr(w, fmt.Errorf("%w: root is required", jsonhttp.ErrBadRequest))
		return
	}
	if err := api.agent.host.Activate(disk.RootID(req.Root), req.Tries); err != nil {
		replyErr(w, err)
		return
	}
	jsonhttp.Reply(w, http.StatusOK, req)
}

// rollback makes the committed fallback image boot next and stay the
// default (409 when there is none).
func (api *API) rollback(w http.ResponseWriter, _ *http.Request) {
	if err := api.agent.host.Rollback(); err != nil {
		replyErr(w, err)
		return
	}
	st := api.agent.host.Status()
	jsonhttp.Reply(w, http.StatusOK, st.Disk.Images().Wire())
}

func (api *API) getEtc(w http.ResponseWriter, _ *http.Request) {
	jsonhttp.Reply(w, http.StatusOK, api.agent.host.Etc())
}

func (api *API) putEtc(w http.ResponseWriter, r *http.Request) {
	var req agentv1.EtcEdit
	if err := jsonhttp.Decode(r, &req); err != nil {
		replyErr(w, err)
		return
	}
	if err := api.agent.host.WriteEtc(req.Path, req.Content); err != nil {
		replyErr(w, err)
		return
	}
	jsonhttp.Reply(w, http.StatusOK, api.agent.host.Etc())
}

func (api *API) health(w http.ResponseWriter, r *http.Request) {
	h, err := api.agent.CheckHealth(r.Context())
	if err != nil {
		replyErr(w, err)
		return
	}
	status := http.StatusOK
	if !h.Healthy {
		status = http.StatusServiceUnavailable
	}
	jsonhttp.Reply(w, status, h)
}

// reset starts a reset-based reprovisioning: reboot into recovery, which
// wipes the persistent and OEM partitions.
func (api *API) reset(w http.ResponseWriter, _ *http.Request) {
	if err := api.agent.RequestReset(); err != nil {
		replyErr(w, err)
		return
	}
	jsonhttp.Reply(w, http.StatusAccepted, map[string]string{"status": "rebooting into recovery"})
}

func (api *API) getPersistent(w http.ResponseWriter, _ *http.Request) {
	jsonhttp.Reply(w, http.StatusOK, api.agent.host.Persistent())
}

func (api *API) putPersistent(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		replyErr(w, err)
		return
	}
	if err := api.agent.host.SetPersistent(r.PathValue("name"), string(data)); err != nil {
		replyErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// putConfigDrive writes the config drive, as Ironic's agent writes the
// config drive partition.
func (api *API) putConfigDrive(w http.ResponseWriter, r *http.Request) {
	var cd agentv1.ConfigDrive
	if err := jsonhttp.Decode(r, &cd); err != nil {
		replyErr(w, err)
		return
	}
	if err := api.agent.host.WriteConfigDrive(cd.UserData, cd.MetaData); err != nil {
		replyErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// clean is metadata cleaning from a deploy ramdisk (lab.Host.EraseDisk).
func (api *API) clean(w http.ResponseWriter, _ *http.Request) {
	if err := api.agent.host.EraseDisk(); err != nil {
		replyErr(w, err)
		return
	}
	api.agent.record("DiskCleaned", "metadata cleaning erased the disk")
	api.agent.erased()
	w.WriteHeader(http.StatusNoContent)
}

// kubeadmUpgrade runs `kubeadm upgrade node` now on a control-plane
// host (an updater does, when the host already runs the image it wants:
// no boot ran it), and answers what it applied.
func (api *API) kubeadmUpgrade(w http.ResponseWriter, r *http.Request) {
	k, err := api.agent.KubeadmUpgrade(r.Context())
	if err != nil {
		replyErr(w, err)
		return
	}
	jsonhttp.Reply(w, http.StatusOK, k)
}

// putFiles writes files on the running OS (an updater changing the
// KubeadmConfig's files in place).
func (api *API) putFiles(w http.ResponseWriter, r *http.Request) {
	var req agentv1.FilesRequest
	if err := jsonhttp.Decode(r, &req); err != nil {
		replyErr(w, err)
		return
	}
	for path := range req.Files {
		if !strings.HasPrefix(path, "/") {
			replyErr(w, fmt.Errorf("%w: file path %q is not absolute", jsonhttp.ErrBadRequest, path))
			return
		}
	}
	sums, err := api.agent.WriteFiles(req.Files)
	if err != nil {
		replyErr(w, err)
		return
	}
	jsonhttp.Reply(w, http.StatusOK, sums)
}

// reboot restarts the host from its OS (`systemctl reboot`: a graceful
// shutdown, so an OSTree host finalises what is staged), the way a host
// without a BMC (or an Elemental system agent) reboots.
func (api *API) reboot(w http.ResponseWriter, _ *http.Request) {
	go func() { _ = api.agent.host.Reboot(context.Background()) }()
	jsonhttp.Reply(w, http.StatusAccepted, map[string]string{"status": "rebooting"})
}
