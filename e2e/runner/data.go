package runner

import (
	"context"
	"fmt"
	"strings"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/sim/disk"
)

// The data a run leaves before the upgrade and looks for after it: a
// marker on every bound host's persistent partition (lab providers), an
// admin's edit of /etc on every bound OSTree host, and an object in the
// workload cluster (every provider).
const (
	marker         = "upgradelab/scenario-marker"
	etcMarker      = "/etc/upgradelab/admin-marker"
	workloadMarker = "upgradelab-scenario-marker"
)

func (r *run) writeData(ctx context.Context) error {
	wl, err := r.workloadClient(ctx)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: workloadMarker},
		Data: map[string]string{"written": "before the upgrade to " + r.scenario.To.Version}}
	if err := wl.Create(ctx, cm); err != nil {
		return fmt.Errorf("writing ConfigMap %s/%s into the workload cluster: %w", cm.Namespace, cm.Name, err)
	}
	r.tl.Add(timeline.Entry{Kind: check.KindWorkloadData, Name: "ConfigMap/" + cm.Namespace + "/" + cm.Name, New: map[string]string{check.FieldMarker: "written"}})
	if !r.provider.Lab {
		return nil
	}
	if err := r.deployApp(ctx, wl); err != nil {
		return err
	}
	hosts := &metal3.BareMetalHostList{}
	if err := r.env.Client.List(ctx, hosts, client.InNamespace(r.env.Namespace)); err != nil {
		return err
	}
	for _, h := range hosts.Items {
		if h.Spec.ConsumerRef == nil {
			continue
		}
		lh, err := r.env.Site.Lab.Host(r.labHost(&h))
		if err != nil {
			return err
		}
		if err := lh.SetPersistent(marker, "written before the upgrade on "+h.Name); err != nil {
			return err
		}
		r.tl.Add(timeline.Entry{Kind: check.KindHostData, Name: h.Name, New: map[string]string{check.FieldMarker: "written", "labHost": lh.Name()}})
		if st := lh.Status(); st.Disk.OSKind() == disk.OSTree {
			// What an admin changes on a host by hand; OSTree's /etc
			// merge is to carry it into the next deployment.
			if err := lh.WriteEtc(etcMarker, "edited before the upgrade on "+h.Name); err != nil {
				return err
			}
			r.tl.Add(timeline.Entry{Kind: check.KindHostEtc, Name: h.Name, New: map[string]string{check.FieldMarker: "written", "labHost": lh.Name()}})
		}
	}
	return nil
}

func (r *run) readData(ctx context.Context) {
	for _, e := range r.tl.Entries() {
		if e.New[check.FieldMarker] != "written" {
			continue
		}
		state := "absent"
		switch e.Kind {
		case check.KindHostData:
			if h, err := r.env.Site.Lab.Host(e.New["labHost"]); err == nil && strings.Contains(h.Persistent()[marker], e.Name) {
				state = "present"
			}
		case check.KindHostEtc:
			if h, err := r.env.Site.Lab.Host(e.New["labHost"]); err == nil && strings.Contains(h.Etc()[etcMarker], e.Name) {
				state = "present"
			}
		case check.KindWorkloadData:
			cm := &corev1.ConfigMap{}
			wl, err := r.workloadClient(ctx)
			if err == nil {
				err = wl.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: workloadMarker}, cm)
			}
			switch {
			case err == nil && strings.HasPrefix(cm.Data["written"], "before the upgrade"):
				state = "present"
			case err != nil && !apierrors.IsNotFound(err):
				// The API could not say: not "absent", which would claim
				// the object is gone.
				state = "unreadable (" + err.Error() + ")"
			}
		default:
			continue
		}
		r.tl.Add(timeline.Entry{Kind: e.Kind, Name: e.Name, Old: e.New, New: map[string]string{check.FieldMarker: state}})
	}
}
