package callback

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
)

// Annotations on a BareMetalHost created by registration.
const (
	// PoolLabel names the registration pool a host registered into.
	PoolLabel = "infrastructure.upgradelab.dev/pool"
	// MachineIDAnnotation is the identity the host registered with; a
	// reset host registers with a new one.
	MachineIDAnnotation = "infrastructure.upgradelab.dev/machine-id"
	// AgentURLAnnotation is where the host's agent answers.
	AgentURLAnnotation = "infrastructure.upgradelab.dev/agent-url"
	// HostnameAnnotation is the host's name as it reported it.
	HostnameAnnotation = "infrastructure.upgradelab.dev/hostname"
)

// Seen is a heartbeat and when it arrived.
type Seen struct {
	agentv1.Heartbeat
	At time.Time
}

// Heartbeats remembers the last heartbeat of each MAC. It is memory only:
// after a provider restart the ramdisks' next heartbeats fill it again.
type Heartbeats struct {
	mu   sync.Mutex
	last map[string]Seen
	// listeners hear each heartbeat's MACs, as Ironic's heartbeat wakes
	// the deploy waiting on it.
	listeners []func(mac string)
}

// Listen calls fn with each MAC of every heartbeat from now on. fn must
// not block: it runs on the heartbeat's request.
func (h *Heartbeats) Listen(fn func(mac string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listeners = append(h.listeners, fn)
}

// Lookup returns the last heartbeat from a host with mac.
func (h *Heartbeats) Lookup(mac string) (Seen, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.last[strings.ToLower(mac)]
	return s, ok
}

func (h *Heartbeats) record(hb agentv1.Heartbeat) {
	h.mu.Lock()
	if h.last == nil {
		h.last = map[string]Seen{}
	}
	for _, mac := range hb.MACs {
		h.last[strings.ToLower(mac)] = Seen{Heartbeat: hb, At: time.Now()}
	}
	listeners := h.listeners
	h.mu.Unlock()
	for _, fn := range listeners {
		for _, mac := range hb.MACs {
			fn(strings.ToLower(mac))
		}
	}
}

// Registration creates, adopts and deletes the hosts of a pool.
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch;create;patch;delete

// Server serves both endpoints over HTTPS.
type Server struct {
	// Listener is bound by the caller, so the URL hosts are told is known
	// before the server starts.
	Listener   net.Listener
	TLS        *tls.Config
	Client     client.Client
	Heartbeats *Heartbeats
}

// Start serves until ctx ends (a controller-runtime Runnable).
func (s *Server) Start(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/heartbeat", s.heartbeat)
	mux.HandleFunc("POST /v1/registration/{namespace}/{pool}", s.register)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(tls.NewListener(s.Listener, s.TLS)); err != http.ErrServerClosed {
		return fmt.Errorf("callback endpoint: %w", err)
	}
	return nil
}

// ParseHeartbeat reads a heartbeat body strictly.
func ParseHeartbeat(body io.Reader) (agentv1.Heartbeat, error) {
	var hb agentv1.Heartbeat
	if err := decodeStrict(body, &hb); err != nil {
		return hb, fmt.Errorf("heartbeat: %w", err)
	}
	if len(hb.MACs) == 0 || hb.AgentURL == "" {
		return hb, fmt.Errorf("heartbeat: macs and agentURL are required")
	}
	return hb, nil
}

// ParseRegistration reads a registration into namespace and pool.
func ParseRegistration(body io.Reader, namespace, pool string) (agentv1.Registration, error) {
	var reg agentv1.Registration
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return reg, fmt.Errorf("registration: namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(pool); len(errs) > 0 {
		return reg, fmt.Errorf("registration: pool %q: %s", pool, strings.Join(errs, "; "))
	}
	if err := decodeStrict(body, &reg); err != nil {
		return reg, fmt.Errorf("registration: %w", err)
	}
	switch {
	case len(reg.MachineID) < 8 || len(validation.IsDNS1123Label(strings.ToLower(reg.MachineID[:8]))) > 0:
		return reg, fmt.Errorf("registration: machineID %q: want 8 or more characters, the first 8 letters or digits", reg.MachineID)
	case reg.Hostname == "", len(reg.MACs) == 0, reg.AgentURL == "":
		return reg, fmt.Errorf("registration: hostname, macs and agentURL are required")
	}
	return reg, nil
}

func decodeStrict(body io.Reader, v any) error {
	dec := json.NewDecoder(io.LimitReader(body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed body: %w", err)
	}
	return nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	hb, err := ParseHeartbeat(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.Heartbeats.record(hb)
	w.WriteHeader(http.StatusAccepted)
}

// register creates (or refreshes) the host's BareMetalHost. A host that
// registers with a new machine ID after a reset supersedes its old object,
// which is deleted now that the reset has finished.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	ns, pool := r.PathValue("namespace"), r.PathValue("pool")
	reg, err := ParseRegistration(r.Body, ns, pool)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	logger := log.FromContext(ctx).WithValues("pool", pool, "machineID", reg.MachineID)
	hosts := &metal3.BareMetalHostList{}
	if err := s.Client.List(ctx, hosts, client.InNamespace(ns), client.MatchingLabels{PoolLabel: pool}); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	var current *metal3.BareMetalHost
	for i := range hosts.Items {
		h := &hosts.Items[i]
		if h.Annotations[MachineIDAnnotation] == reg.MachineID {
			current = h
			continue
		}
		if !strings.EqualFold(h.Spec.BootMACAddress, reg.MACs[0]) || !h.DeletionTimestamp.IsZero() {
			continue
		}
		if h.Spec.ConsumerRef != nil {
			logger.Info("host registered anew while its old identity still holds a machine; keeping the old object", "old", h.Name)
			continue
		}
		if err := s.Client.Delete(ctx, h); client.IgnoreNotFound(err) != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		logger.Info("reset finished: old identity deleted", "old", h.Name)
	}
	if current != nil {
		if current.Annotations[AgentURLAnnotation] != reg.AgentURL {
			patch := client.MergeFrom(current.DeepCopy())
			current.Annotations[AgentURLAnnotation] = reg.AgentURL
			if err := s.Client.Patch(ctx, current, patch); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	host := &metal3.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: pool + "-" + strings.ToLower(reg.MachineID[:8]),
			Labels:      map[string]string{PoolLabel: pool},
			Annotations: map[string]string{MachineIDAnnotation: reg.MachineID, AgentURLAnnotation: reg.AgentURL, HostnameAnnotation: reg.Hostname},
		},
		Spec: metal3.BareMetalHostSpec{BootMACAddress: reg.MACs[0], Online: true,
			Description: "registered from " + reg.Image},
	}
	if err := s.Client.Create(ctx, host); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	logger.Info("registered", "host", host.Name)
	w.WriteHeader(http.StatusCreated)
}
