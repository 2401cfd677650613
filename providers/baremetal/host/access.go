package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/providers/baremetal/callback"
	"github.com/upgradelab/upgradelab/providers/baremetal/hostagent"
)

// credentials reads spec.bmc.credentialsName (keys username, password).
func (r *Reconciler) credentials(ctx context.Context, host *metal3.BareMetalHost) (user, pass, version string, err error) {
	name := host.Spec.BMC.CredentialsName
	if name == "" {
		return "", "", "", errors.New("spec.bmc.credentialsName is empty")
	}
	s := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: host.Namespace, Name: name}, s); err != nil {
		return "", "", "", fmt.Errorf("credentials secret %s/%s: %w", host.Namespace, name, err)
	}
	user, pass = string(s.Data["username"]), string(s.Data["password"])
	if user == "" || pass == "" {
		return "", "", "", fmt.Errorf("credentials secret %s/%s: keys username and password are required", host.Namespace, name)
	}
	return user, pass, s.ResourceVersion, nil
}

// registeredAgent is the agent a registered host announced.
func (r *Reconciler) registeredAgent(host *metal3.BareMetalHost) *hostagent.Client {
	return hostagent.New(r.AgentHTTP, host.Annotations[callback.AgentURLAnnotation])
}

// configDrive reads the secrets spec.userData (key userData) and
// spec.metaData (key metaData, a JSON object of strings) name.
func (r *Reconciler) configDrive(ctx context.Context, host *metal3.BareMetalHost) (userData []byte, metaData map[string]string, err error) {
	if userData, err = r.secretKey(ctx, host, host.Spec.UserData, "userData"); err != nil {
		return nil, nil, err
	}
	raw, err := r.secretKey(ctx, host, host.Spec.MetaData, "metaData")
	if err != nil || raw == nil {
		return userData, nil, err
	}
	if err := json.Unmarshal(raw, &metaData); err != nil {
		return nil, nil, fmt.Errorf("meta data secret %s key metaData: want a JSON object of strings: %w", host.Spec.MetaData.Name, err)
	}
	return userData, metaData, nil
}

func (r *Reconciler) secretKey(ctx context.Context, host *metal3.BareMetalHost, ref *corev1.SecretReference, key string) ([]byte, error) {
	if ref == nil {
		return nil, nil
	}
	ns := ref.Namespace
	if ns == "" {
		ns = host.Namespace
	}
	s := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, s); err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", ns, ref.Name, err)
	}
	return s.Data[key], nil
}
