package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apiserver/pkg/endpoints/request"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// subresources serves what CAPI's in-memory API handler does not and a
// real kube-apiserver does, in front of it:
//
//   - POST .../namespaces/NS/pods/NAME/eviction (policy/v1 Eviction):
//     the Eviction API, honouring PodDisruptionBudgets (eviction.go);
//     CAPI's drain and the in-place extension's evict through it.
//   - PUT and PATCH of nodes/NAME/status and namespaces/NS/pods/NAME/status:
//     only the status is taken from the request, as the status
//     subresource does.
//   - A watch with sendInitialEvents (client-go's watch-list, which its
//     informers use to list) and a resourceVersion: CAPI's handler sends
//     no initial events then, only the bookmark, so an informer that
//     lists again after its connection dropped (a VIP failover) empties
//     its store. kube-apiserver sends the state "not older than" that
//     version, which the current state is: the version is dropped
//     before CAPI's handler sees the request.
//
// Everything else goes to next (CAPI's handler).
type subresources struct {
	clusters *Clusters
	next     http.Handler
}

func (s *subresources) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// kube-apiserver's own reading of a request: verb, resource, name,
	// subresource.
	info, err := requestInfos.NewRequestInfo(r)
	if err != nil || !info.IsResourceRequest {
		s.next.ServeHTTP(w, r) // discovery, the health check
		return
	}
	if err := s.etcdRefuses(r, info); err != nil {
		writeStatus(w, err)
		return
	}
	switch {
	case info.APIGroup == "" && info.Resource == "pods" && info.Subresource == "eviction":
		if r.Method != http.MethodPost {
			writeStatus(w, apierrors.NewMethodNotSupported(corev1.Resource("pods/eviction"), r.Method))
			return
		}
		s.evict(w, r, info.Namespace, info.Name)
	case info.APIGroup == "" && info.Resource == "nodes" && info.Subresource == "status":
		s.status(w, r, client.ObjectKey{Name: info.Name}, &corev1.Node{})
	case info.APIGroup == "" && info.Resource == "pods" && info.Subresource == "status":
		s.status(w, r, client.ObjectKey{Namespace: info.Namespace, Name: info.Name}, &corev1.Pod{})
	case info.Verb == "watch" && r.URL.Query().Get("sendInitialEvents") == "true" && r.URL.Query().Get("resourceVersion") != "":
		q := r.URL.Query()
		q.Del("resourceVersion")
		r.URL.RawQuery = q.Encode()
		s.next.ServeHTTP(w, r)
	default:
		s.next.ServeHTTP(w, r)
	}
}

var requestInfos = &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}

// etcdRefuses answers for the cluster's etcd before any handler runs
// (the store refuses the same way, but CAPI's handler would not pass
// the error on as a Status kube-apiserver's clients can read): a read
// or write the etcd cannot serve now is a 500 with etcd's message. A
// watch is served from the watch cache and stays open (it sees nothing
// while nothing can change); a port-forward reaches the etcd member,
// which answers for itself.
func (s *subresources) etcdRefuses(r *http.Request, info *request.RequestInfo) error {
	if info.Verb == "watch" || info.Subresource == "portforward" {
		return nil
	}
	cluster, err := s.cluster(r)
	if err != nil {
		return nil // the handler behind answers for an unknown cluster
	}
	b := s.clusters.behaviour(cluster)
	if info.Verb == "get" || info.Verb == "list" {
		if b.Reads != nil {
			return apiError(b.Reads)
		}
		return nil
	}
	if b.Writes != nil {
		return apiError(b.Writes)
	}
	return nil
}

func (s *subresources) cluster(r *http.Request) (string, error) {
	name, err := s.clusters.resolve(r.Host)
	if err != nil {
		return "", apierrors.NewInternalError(err)
	}
	return name, nil
}

func (s *subresources) evict(w http.ResponseWriter, r *http.Request, namespace, name string) {
	cluster, err := s.cluster(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	ev := &policyv1.Eviction{}
	if err := s.decode(r, ev); err != nil {
		writeStatus(w, apierrors.NewBadRequest("eviction: "+err.Error()))
		return
	}
	if ev.Name != "" && ev.Name != name {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("name in URL does not match name in Eviction object: %s != %s", name, ev.Name)))
		return
	}
	if err := s.clusters.Evict(r.Context(), cluster, namespace, name); err != nil {
		writeStatus(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusSuccess, Code: http.StatusCreated})
}

// decode reads a request body in JSON or protobuf, as clients send.
func (s *subresources) decode(r *http.Request, into runtime.Object) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return err
	}
	_, _, err = s.clusters.codecs.UniversalDeserializer().Decode(body, nil, into)
	return err
}

// status replaces or patches obj's status only.
func (s *subresources) status(w http.ResponseWriter, r *http.Request, key client.ObjectKey, obj client.Object) {
	cluster, err := s.cluster(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	cl := s.clusters.client(cluster)
	switch r.Method {
	case http.MethodGet:
	case http.MethodPut, http.MethodPatch:
		if err := cl.Get(r.Context(), key, obj); err != nil {
			writeStatus(w, err)
			return
		}
		current, err := json.Marshal(obj)
		if err != nil {
			writeStatus(w, apierrors.NewInternalError(err))
			return
		}
		var desired []byte
		switch {
		case r.Method == http.MethodPut:
			in := obj.DeepCopyObject().(client.Object)
			if _, _, err = s.clusters.codecs.UniversalDeserializer().Decode(body, nil, in); err == nil {
				desired, err = json.Marshal(in)
			}
		case r.Header.Get("Content-Type") == "application/merge-patch+json":
			desired, err = jsonpatch.MergePatch(current, body)
		case r.Header.Get("Content-Type") == "application/strategic-merge-patch+json":
			desired, err = strategicpatch.StrategicMergePatch(current, body, obj)
		case r.Header.Get("Content-Type") == "application/json-patch+json":
			var p jsonpatch.Patch
			if p, err = jsonpatch.DecodePatch(body); err == nil {
				desired, err = p.Apply(current)
			}
		default:
			writeStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
				Reason: metav1.StatusReasonUnsupportedMediaType, Message: "unsupported patch type " + r.Header.Get("Content-Type")}})
			return
		}
		if err != nil {
			writeStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		if err := copyStatus(obj, desired); err != nil {
			writeStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		if err := cl.Update(r.Context(), obj); err != nil {
			writeStatus(w, err)
			return
		}
	default:
		writeStatus(w, apierrors.NewMethodNotSupported(corev1.Resource("status"), r.Method))
		return
	}
	if err := cl.Get(r.Context(), key, obj); err != nil {
		writeStatus(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(obj)
}

// copyStatus sets obj's status to the one in desired (a whole object's
// JSON), leaving its metadata and spec as stored.
func copyStatus(obj client.Object, desired []byte) error {
	switch o := obj.(type) {
	case *corev1.Node:
		var d corev1.Node
		if err := json.Unmarshal(desired, &d); err != nil {
			return err
		}
		o.Status = d.Status
	case *corev1.Pod:
		var d corev1.Pod
		if err := json.Unmarshal(desired, &d); err != nil {
			return err
		}
		o.Status = d.Status
	default:
		return fmt.Errorf("no status subresource for %T", obj)
	}
	return nil
}

// writeStatus answers err as kube-apiserver does: a Status object with
// its code.
func writeStatus(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(status.Code))
	_ = json.NewEncoder(w).Encode(status)
}
