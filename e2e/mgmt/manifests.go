package mgmt

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// webhookEndpoint is where the API server reaches one manager's webhooks:
// host and port for a manager on this machine, or the Service in front of
// a manager in the cluster (serviceName in serviceNamespace, port 443),
// as CAPI's config/webhook writes it.
type webhookEndpoint struct {
	host     string
	port     int
	caBundle []byte

	serviceNamespace, serviceName string
}

func (e webhookEndpoint) url(path string) *string {
	if e.serviceName != "" {
		return nil
	}
	u := "https://" + e.host + ":" + strconv.Itoa(e.port) + path
	return &u
}

// service is the Service reference of an in-cluster endpoint (nil for a
// URL one).
func (e webhookEndpoint) service(path string) *admissionv1.ServiceReference {
	if e.serviceName == "" {
		return nil
	}
	return &admissionv1.ServiceReference{Namespace: e.serviceNamespace, Name: e.serviceName, Path: &path, Port: ptr.To[int32](443)}
}

// loadCRDs reads a manager's CRDs from its config/crd folder and makes the edits its kustomization would: the contract labels,
// and conversion through the manager's webhook for every CRD that serves
// more than one version.
func loadCRDs(m managerSpec, ep webhookEndpoint) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := loadOwnCRDs(m, ep)
	if err != nil {
		return nil, err
	}
	for _, dir := range m.extraCRDs {
		extra, err := readCRDs(m.name, dir)
		if err != nil {
			return nil, err
		}
		crds = append(crds, extra...)
	}
	return crds, nil
}

// loadOwnCRDs reads config/crd: none for a manager without it (the
// in-place extension serves webhooks only; the BareMetalHost inventory
// has only extra CRDs).
func loadOwnCRDs(m managerSpec, ep webhookEndpoint) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crdDir := filepath.Join(m.configDir, "crd")
	if _, err := os.Stat(crdDir); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	labels, err := kustomizationLabels(filepath.Join(crdDir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	crds, err := readCRDs(m.name, filepath.Join(crdDir, "bases"))
	if err != nil {
		return nil, err
	}
	for _, crd := range crds {
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		for k, v := range labels {
			crd.Labels[k] = v
		}
		if len(crd.Spec.Versions) > 1 {
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ConversionReviewVersions: []string{"v1", "v1beta1"},
					ClientConfig: &apiextensionsv1.WebhookClientConfig{
						URL:      ep.url("/convert"),
						Service:  conversionService(ep.service("/convert")),
						CABundle: ep.caBundle,
					},
				},
			}
		}
	}
	return crds, nil
}

// readCRDs reads every CRD of the YAML files in dir.
func readCRDs(manager, dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("%s: no CRDs in %s", manager, dir)
	}
	sort.Strings(files)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		docs, err := yamlDocuments(f)
		if err != nil {
			return nil, err
		}
		for _, doc := range docs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(doc, crd); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			crds = append(crds, crd)
		}
	}
	return crds, nil
}

// kustomizationLabels reads the labels a kustomization adds to every object
// (its `labels[].pairs` and the older `commonLabels`).
func kustomizationLabels(path string) (map[string]string, error) {
	k, err := readKustomization(path)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{}
	for _, l := range k.Labels {
		for key, v := range l.Pairs {
			labels[key] = v
		}
	}
	for key, v := range k.CommonLabels {
		labels[key] = v
	}
	return labels, nil
}

// loadWebhookConfigs reads a manager's admission webhook manifests and
// points them at its loopback port. All managers ship configurations with
// the same names, so each is prefixed with the manager's name.
func loadWebhookConfigs(m managerSpec, ep webhookEndpoint) ([]client.Object, error) {
	path := filepath.Join(m.configDir, "webhook", "manifests.yaml")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil // a manager without admission webhooks (CAPI's test extension)
	}
	docs, err := yamlDocuments(path)
	if err != nil {
		return nil, err
	}
	var objs []client.Object
	for _, doc := range docs {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		// Both kinds hold webhooks with a clientConfig to point at the manager.
		var obj client.Object
		var configs []*admissionv1.WebhookClientConfig
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			c := &admissionv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, c); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			for i := range c.Webhooks {
				configs = append(configs, &c.Webhooks[i].ClientConfig)
			}
			obj = c
		case "ValidatingWebhookConfiguration":
			c := &admissionv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, c); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			for i := range c.Webhooks {
				configs = append(configs, &c.Webhooks[i].ClientConfig)
			}
			obj = c
		default:
			return nil, fmt.Errorf("%s: unexpected kind %q", path, meta.Kind)
		}
		obj.SetName(m.name + "-" + obj.GetName())
		for _, cc := range configs {
			*cc = pointAt(*cc, ep)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

func pointAt(cc admissionv1.WebhookClientConfig, ep webhookEndpoint) admissionv1.WebhookClientConfig {
	path := "/"
	if cc.Service != nil && cc.Service.Path != nil {
		path = *cc.Service.Path
	}
	return admissionv1.WebhookClientConfig{URL: ep.url(path), Service: ep.service(path), CABundle: ep.caBundle}
}

func conversionService(s *admissionv1.ServiceReference) *apiextensionsv1.ServiceReference {
	if s == nil {
		return nil
	}
	return &apiextensionsv1.ServiceReference{Namespace: s.Namespace, Name: s.Name, Path: s.Path, Port: s.Port}
}

func yamlDocuments(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) > 0 && !bytes.Equal(bytes.TrimSpace(doc), []byte("---")) {
			docs = append(docs, doc)
		}
	}
}

// createOrReplace writes obj, replacing an object of the same name, so a
// plane restarted against an existing cluster updates what it installed.
//
// A failed write is tried again with clusterctl's write back-off (0.5 s,
// x1.5, 13 tries, about 159 s in all: cmd/clusterctl/client/cluster's
// newWriteBackoff, which wraps every component object clusterctl creates),
// so an API server that restarts mid-install (crash.go) delays the plane
// instead of failing it. Unlike clusterctl, an object the API server
// found invalid fails at once: no retry changes that answer.
func createOrReplace(ctx context.Context, c client.Client, obj client.Object) error {
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Steps: 13, Jitter: 0.4}
	var last error
	tries := 0
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		tries++
		last = createOrReplaceOnce(ctx, c, obj)
		if last == nil {
			return true, nil
		}
		if apierrors.IsInvalid(last) || apierrors.IsBadRequest(last) {
			return false, last
		}
		return false, nil
	})
	if err != nil && last != nil && !errors.Is(err, last) {
		return fmt.Errorf("%w (after %d tries: %w)", last, tries, err)
	}
	return err
}

func createOrReplaceOnce(ctx context.Context, c client.Client, obj client.Object) error {
	obj.SetResourceVersion("")
	err := c.Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	existing := obj.DeepCopyObject().(client.Object)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
		return err
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	return c.Update(ctx, obj)
}

// waitEstablished waits until the API server serves every CRD.
func waitEstablished(ctx context.Context, c client.Client, crds []*apiextensionsv1.CustomResourceDefinition) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, crd := range crds {
		for {
			got := &apiextensionsv1.CustomResourceDefinition{}
			err := c.Get(ctx, client.ObjectKeyFromObject(crd), got)
			if err == nil && established(got) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s not established: %w (last error: %s)", crd.Name, ctx.Err(), fmt.Sprint(err))
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
