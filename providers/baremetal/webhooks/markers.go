package webhooks

// The admission webhooks this package serves (controller-gen writes
// config/webhook/manifests.yaml from these).
//
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-upgradelab-dev-v1alpha1-baremetalcluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.upgradelab.dev,resources=baremetalclusters,versions=v1alpha1,name=validation.baremetalcluster.infrastructure.upgradelab.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-upgradelab-dev-v1alpha1-baremetalmachine,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.upgradelab.dev,resources=baremetalmachines,versions=v1alpha1,name=validation.baremetalmachine.infrastructure.upgradelab.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-upgradelab-dev-v1alpha1-baremetalmachinetemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.upgradelab.dev,resources=baremetalmachinetemplates,versions=v1alpha1,name=validation.baremetalmachinetemplate.infrastructure.upgradelab.dev,admissionReviewVersions=v1
