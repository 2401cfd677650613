package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

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

// Status is GET /v1/status.
type Status struct {
	Host  string         `json:"host"`
	Phase lab.Phase      `json:"phase"`
	OS    *lab.RunningOS `json:"os,omitempty"`
	// Images are the disk's OS images in the update contract's terms
	// (booted, staged, fallback; every root), whatever kind the host is.
	Images  disk.Images `json:"images"`
	Node    string      `json:"node,omitempty"`
	Cluster string      `json:"cluster,omitempty"`
	// Kubeadm is what kubeadm last configured a control-plane host with.
	Kubeadm *Kubeadm `json:"kubeadm,omitempty"`
	// Files are the files written on the host by its bootstrap data and
	// by PUT /v1/files: path to the hex SHA-256 of the content.
	Files map[string]string `json:"files,omitempty"`
}

// FilesRequest is PUT /v1/files: files to write on the running OS, as
// cloud-init's write_files would (path to content). The answer is every
// file the host has, as Status.Files.
type FilesRequest struct {
	Files map[string]string `json:"files"`
}

// Kubeadm is the configuration kubeadm applied on a control-plane host:
// the Kubernetes version and the ClusterConfiguration's feature gates
// (from the user data at init, from the cluster's kubeadm-config at join
// and at each `kubeadm upgrade node`).
type Kubeadm struct {
	KubernetesVersion string          `json:"kubernetesVersion"`
	FeatureGates      map[string]bool `json:"featureGates,omitempty"`
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
	mux.HandleFunc("GET /v1/status", api.status)
	mux.HandleFunc("POST /v1/stage", api.stage)
	mux.HandleFunc("POST /v1/activate", api.activate)
	mux.HandleFunc("POST /v1/rollback", api.rollback)
	mux.HandleFunc("GET /v1/etc", api.getEtc)
	mux.HandleFunc("PUT /v1/etc", api.putEtc)
	mux.HandleFunc("POST /v1/health", api.health)
	mux.HandleFunc("POST /v1/reset", api.reset)
	mux.HandleFunc("PUT /v1/configdrive", api.putConfigDrive)
	mux.HandleFunc("POST /v1/clean", api.clean)
	mux.HandleFunc("POST /v1/reboot", api.reboot)
	mux.HandleFunc("POST /v1/kubeadm/upgrade", api.kubeadmUpgrade)
	mux.HandleFunc("PUT /v1/files", api.putFiles)
	mux.HandleFunc("GET /v1/persistent", api.getPersistent)
	mux.HandleFunc("PUT /v1/persistent/{name}", api.putPersistent)
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
	srv := &http.Server{Handler: api.mux, ReadHeaderTimeout: 10 * time.Second}
	api.mu.Lock()
	api.srv = srv
	api.mu.Unlock()
	go srv.Serve(tls.NewListener(l, api.tls))
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

func reply(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func replyErr(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, lab.ErrNotRunning), errors.Is(err, disk.ErrNotWritten), errors.Is(err, disk.ErrNotBooted),
		errors.Is(err, disk.ErrNoFallback), errors.Is(err, disk.ErrNoSuchRoot):
		status = http.StatusConflict
	case errors.Is(err, disk.ErrNoSpace):
		status = http.StatusInsufficientStorage
	case errors.Is(err, errBadRequest), errors.Is(err, disk.ErrEtcPathBad):
		status = http.StatusBadRequest
	}
	reply(w, status, map[string]string{"error": err.Error()})
}

var errBadRequest = errors.New("bad request")

func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", errBadRequest, err)
	}
	return nil
}

func (api *API) status(w http.ResponseWriter, _ *http.Request) {
	s := api.agent.host.Status()
	st := Status{Host: s.Name, Phase: s.Phase, OS: s.OS, Images: s.Disk.Images()}
	api.agent.mu.Lock()
	if api.agent.joined != nil {
		st.Node, st.Cluster = api.agent.joined.NodeName, api.agent.cluster
	}
	if k := api.agent.applied; k != nil {
		st.Kubeadm = &Kubeadm{KubernetesVersion: k.KubernetesVersion, FeatureGates: maps.Clone(k.FeatureGates)}
	}
	st.Files = fileSums(api.agent.files)
	api.agent.mu.Unlock()
	reply(w, http.StatusOK, st)
}

// StageRequest is POST /v1/stage: write an image into the root the host
// stages into (the inactive A/B slot, a new OSTree deployment), verified
// against SHA256 before a byte is written. The answer is a StageResult.
type StageRequest struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}

// StageResult names the root the image went into.
type StageResult struct {
	Root disk.RootID `json:"root"`
}

func (api *API) stage(w http.ResponseWriter, r *http.Request) {
	var req StageRequest
	if err := decodeBody(r, &req); err != nil {
		replyErr(w, err)
		return
	}
	if req.URL == "" || req.SHA256 == "" {
		replyErr(w, fmt.Errorf("%w: url and sha256 are required", errBadRequest))
		return
	}
	root, err := api.agent.host.WriteImage(r.Context(), req.URL, req.SHA256)
	if err != nil {
		replyErr(w, err)
		return
	}
	reply(w, http.StatusOK, StageResult{Root: root})
}

// ActivateRequest is POST /v1/activate: Root (from StageResult or
// Status.Images.Staged) boots next, with Tries boots to pass its health
// check before the bootloader falls back.
type ActivateRequest struct {
	Root  disk.RootID `json:"root"`
	Tries int         `json:"tries"`
}

func (api *API) activate(w http.ResponseWriter, r *http.Request) {
	var req ActivateRequest
	if err := decodeBody(r, &req); err != nil {
		replyErr(w, err)
		return
	}
	if req.Root == "" {
		replyErr(w, fmt.Errorf("%w: root is required", errBadRequest))
		return
	}
	if err := api.agent.host.Activate(req.Root, req.Tries); err != nil {
		replyErr(w, err)
		return
	}
	reply(w, http.StatusOK, req)
}

// rollback makes the committed fallback image boot next and stay the
// default (409 when there is none).
func (api *API) rollback(w http.ResponseWriter, _ *http.Request) {
	if err := api.agent.host.Rollback(); err != nil {
		replyErr(w, err)
		return
	}
	st := api.agent.host.Status()
	reply(w, http.StatusOK, st.Disk.Images())
}

// EtcEdit is PUT /v1/etc: an admin's edit of one file in the running OS's
// /etc (an empty Content deletes it). The answer is the whole /etc.
type EtcEdit struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func (api *API) getEtc(w http.ResponseWriter, _ *http.Request) {
	reply(w, http.StatusOK, api.agent.host.Etc())
}

func (api *API) putEtc(w http.ResponseWriter, r *http.Request) {
	var req EtcEdit
	if err := decodeBody(r, &req); err != nil {
		replyErr(w, err)
		return
	}
	if err := api.agent.host.WriteEtc(req.Path, req.Content); err != nil {
		replyErr(w, err)
		return
	}
	reply(w, http.StatusOK, api.agent.host.Etc())
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
	reply(w, status, h)
}

// reset starts a reset-based reprovisioning: reboot into recovery, which
// wipes the persistent and OEM partitions.
func (api *API) reset(w http.ResponseWriter, _ *http.Request) {
	if err := api.agent.RequestReset(); err != nil {
		replyErr(w, err)
		return
	}
	reply(w, http.StatusAccepted, map[string]string{"status": "rebooting into recovery"})
}

func (api *API) getPersistent(w http.ResponseWriter, _ *http.Request) {
	reply(w, http.StatusOK, api.agent.host.Persistent())
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

// ConfigDrive is PUT /v1/configdrive: what cloud-init reads on the OS's
// first boot.
type ConfigDrive struct {
	UserData []byte            `json:"userData"`
	MetaData map[string]string `json:"metaData,omitempty"`
}

// putConfigDrive writes the config drive, as Ironic's agent writes the
// config drive partition.
func (api *API) putConfigDrive(w http.ResponseWriter, r *http.Request) {
	var cd ConfigDrive
	if err := decodeBody(r, &cd); err != nil {
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
	reply(w, http.StatusOK, k)
}

// putFiles writes files on the running OS (an updater changing the
// KubeadmConfig's files in place).
func (api *API) putFiles(w http.ResponseWriter, r *http.Request) {
	var req FilesRequest
	if err := decodeBody(r, &req); err != nil {
		replyErr(w, err)
		return
	}
	for path := range req.Files {
		if !strings.HasPrefix(path, "/") {
			replyErr(w, fmt.Errorf("%w: file path %q is not absolute", errBadRequest, path))
			return
		}
	}
	sums, err := api.agent.WriteFiles(req.Files)
	if err != nil {
		replyErr(w, err)
		return
	}
	reply(w, http.StatusOK, sums)
}

// reboot restarts the host from its OS (`systemctl reboot`: a graceful
// shutdown, so an OSTree host finalises what is staged), the way a host
// without a BMC (or an Elemental system agent) reboots.
func (api *API) reboot(w http.ResponseWriter, _ *http.Request) {
	go func() { _ = api.agent.host.Reboot(context.Background()) }()
	reply(w, http.StatusAccepted, map[string]string{"status": "rebooting"})
}
