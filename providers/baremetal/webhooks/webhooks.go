package webhooks

import (
	"context"
	"net/url"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/cluster-api/util/topology"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
)

// Setup registers the validators with the manager's webhook server.
func Setup(mgr ctrl.Manager) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.BareMetalCluster{}).WithValidator(clusterValidator{}).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.BareMetalMachine{}).WithValidator(machineValidator{}).Complete(); err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.BareMetalMachineTemplate{}).WithValidator(templateValidator{}).Complete()
}

func validateSpec(spec infrav1.BareMetalMachineSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if u, err := url.Parse(spec.Image.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, field.Invalid(path.Child("image", "url"), spec.Image.URL, "must be an http or https URL"))
	}
	if fw := spec.NICFirmware; fw != nil {
		if u, err := url.Parse(fw.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") == "" {
			errs = append(errs, field.Invalid(path.Child("nicFirmware", "url"), fw.URL, "must be an http or https URL whose path names the package"))
		}
	}
	if _, err := metav1.LabelSelectorAsSelector(&spec.HostSelector); err != nil {
		errs = append(errs, field.Invalid(path.Child("hostSelector"), spec.HostSelector, err.Error()))
	}
	return errs
}

type clusterValidator struct{}

func (clusterValidator) ValidateCreate(_ context.Context, c *infrav1.BareMetalCluster) (admission.Warnings, error) {
	return nil, nil
}

// ValidateUpdate keeps the endpoint once set: CAPI and every kubeconfig
// point at it.
func (clusterValidator) ValidateUpdate(_ context.Context, old, c *infrav1.BareMetalCluster) (admission.Warnings, error) {
	if old.Spec.ControlPlaneEndpoint.IsValid() && old.Spec.ControlPlaneEndpoint != c.Spec.ControlPlaneEndpoint {
		return nil, toError(c, field.ErrorList{field.Forbidden(field.NewPath("spec", "controlPlaneEndpoint"), "is immutable once set")})
	}
	return nil, nil
}

func (clusterValidator) ValidateDelete(context.Context, *infrav1.BareMetalCluster) (admission.Warnings, error) {
	return nil, nil
}

type machineValidator struct{}

func (machineValidator) ValidateCreate(_ context.Context, m *infrav1.BareMetalMachine) (admission.Warnings, error) {
	return nil, toError(m, validateSpec(m.Spec, field.NewPath("spec")))
}

// ValidateUpdate allows setting providerID once and never changes the
// host selector (the machine would have to move). The image may change:
// CAPI patches it during an in-place update.
func (machineValidator) ValidateUpdate(_ context.Context, old, m *infrav1.BareMetalMachine) (admission.Warnings, error) {
	errs := validateSpec(m.Spec, field.NewPath("spec"))
	if old.Spec.ProviderID != "" && old.Spec.ProviderID != m.Spec.ProviderID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "providerID"), "is immutable once set"))
	}
	if !reflect.DeepEqual(old.Spec.HostSelector, m.Spec.HostSelector) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "hostSelector"), "is immutable"))
	}
	return nil, toError(m, errs)
}

func (machineValidator) ValidateDelete(context.Context, *infrav1.BareMetalMachine) (admission.Warnings, error) {
	return nil, nil
}

type templateValidator struct{}

func (templateValidator) ValidateCreate(_ context.Context, t *infrav1.BareMetalMachineTemplate) (admission.Warnings, error) {
	return nil, toError(t, validateSpec(t.Spec.Template.Spec, field.NewPath("spec", "template", "spec")))
}

// ValidateUpdate refuses any change of the template, as CAPI's contract
// asks: a rollout is a new template. The topology controller's dry-run
// (it applies its desired template to learn whether it differs, then
// rotates to a new one) is let through, as the contract allows.
func (templateValidator) ValidateUpdate(ctx context.Context, old, t *infrav1.BareMetalMachineTemplate) (admission.Warnings, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, err
	}
	if !reflect.DeepEqual(old.Spec, t.Spec) && !topology.IsDryRunRequest(req, t) {
		return nil, toError(t, field.ErrorList{field.Forbidden(field.NewPath("spec"), "BareMetalMachineTemplate spec is immutable; create a new template and point the owner at it")})
	}
	return nil, nil
}

func (templateValidator) ValidateDelete(context.Context, *infrav1.BareMetalMachineTemplate) (admission.Warnings, error) {
	return nil, nil
}

// toError is the API server's Invalid error, which names the kind, the
// object and each field.
func toError(obj client.Object, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	kind := reflect.TypeOf(obj).Elem().Name()
	return apierrors.NewInvalid(infrav1.GroupVersion.WithKind(kind).GroupKind(), obj.GetName(), errs)
}
