package mgmt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Every manager talks to the API server as itself, never as the admin:
// as the ServiceAccount its config/default deploys it with, allowed
// exactly what its config/rbac grants. That is what a management cluster
// does with a provider installed by clusterctl, so a permission missing
// from a provider's RBAC (one of the commonest provider bugs) fails here
// as it fails there, with the API server's Forbidden in the manager's
// log.
//
// The harness does for the RBAC what `kustomize build config/default`
// does, without kustomize: the namespace and namePrefix of
// config/default/kustomization.yaml, the resources of
// config/rbac/kustomization.yaml, and the patches of config/default that
// touch those resources (CAPI's role aggregation patch). The manager runs
// on the host, not in a Pod, so it gets no ServiceAccount token: the
// plane's admin kubeconfig impersonates the ServiceAccount's user and
// groups instead, which the API server authorizes exactly as it would
// the token (RBAC sees the same user and groups).

// managerIdentity is who a manager is to the API server, and what it may
// do there.
type managerIdentity struct {
	namespace, serviceAccount string
	// objects are the ServiceAccount's namespace, the ServiceAccount and
	// the Roles, ClusterRoles and their bindings, as the kustomization
	// would write them.
	objects []client.Object
}

// user is the user name the API server gives the ServiceAccount.
func (id managerIdentity) user() string {
	return "system:serviceaccount:" + id.namespace + ":" + id.serviceAccount
}

// groups are the ServiceAccount's groups.
func (id managerIdentity) groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + id.namespace, "system:authenticated"}
}

// kustomization is the part of a kustomization.yaml the plane reads: the
// labels it adds to every object (crd/), the resources it lists (rbac/),
// and the names, namespace and patches of config/default.
type kustomization struct {
	Labels []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	CommonLabels map[string]string `json:"commonLabels"`
	Namespace    string            `json:"namespace"`
	NamePrefix   string            `json:"namePrefix"`
	Resources    []string          `json:"resources"`
	Patches      []struct {
		Path string `json:"path"`
	} `json:"patches"`
	PatchesStrategicMerge []string `json:"patchesStrategicMerge"`
}

func readKustomization(path string) (*kustomization, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k := &kustomization{}
	if err := yaml.Unmarshal(data, k); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// loadIdentity reads a manager's identity and RBAC from its config
// folder. A manager without config/rbac is an error naming the folder:
// it would have no permission at all.
func loadIdentity(m managerSpec) (*managerIdentity, error) {
	rbacDir := filepath.Join(m.configDir, "rbac")
	if m.configDir == "" {
		return nil, fmt.Errorf("manager %s: no config folder: its permissions come from config/rbac (see docs/PROVIDERS.md, \"RBAC\")", m.name)
	}
	if _, err := os.Stat(rbacDir); err != nil {
		return nil, fmt.Errorf("manager %s: %s: %w: its permissions come from config/rbac (see docs/PROVIDERS.md, \"RBAC\")", m.name, rbacDir, errors.Unwrap(err))
	}
	// What config/default says of names and namespace, as kustomize
	// applies it; a folder without config/default gets the manager's name.
	def := &kustomization{Namespace: m.name + "-system", NamePrefix: m.name + "-"}
	defPath := filepath.Join(m.configDir, "default", "kustomization.yaml")
	if _, err := os.Stat(defPath); err == nil {
		if def, err = readKustomization(defPath); err != nil {
			return nil, err
		}
		if def.Namespace == "" {
			return nil, fmt.Errorf("%s: namespace: required (the namespace the manager's ServiceAccount lives in)", defPath)
		}
	}
	files, err := rbacFiles(rbacDir)
	if err != nil {
		return nil, err
	}
	var objs []client.Object
	for _, f := range files {
		read, err := readRBACObjects(f)
		if err != nil {
			return nil, err
		}
		objs = append(objs, read...)
	}
	// config/default's patches of these objects (CAPI's aggregation
	// patch: a label on the role, the binding pointed at the aggregate).
	var patchFiles []string
	for _, p := range def.Patches {
		patchFiles = append(patchFiles, filepath.Join(m.configDir, "default", p.Path))
	}
	for _, p := range def.PatchesStrategicMerge {
		patchFiles = append(patchFiles, filepath.Join(m.configDir, "default", p))
	}
	for _, f := range patchFiles {
		patches, err := readRBACObjects(f)
		if err != nil {
			return nil, err
		}
		for _, p := range patches {
			applyPatch(objs, p)
		}
	}

	id := &managerIdentity{namespace: def.Namespace}
	id.objects = append(id.objects, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: def.Namespace}})
	for _, o := range objs {
		prefix(o, def.NamePrefix, def.Namespace)
		if sa, ok := o.(*corev1.ServiceAccount); ok && id.serviceAccount == "" {
			id.serviceAccount = sa.Name
		}
		id.objects = append(id.objects, o)
	}
	if id.serviceAccount == "" {
		return nil, fmt.Errorf("manager %s: %s declares no ServiceAccount: a manager runs as the ServiceAccount its rbac names", m.name, rbacDir)
	}
	return id, nil
}

// rbacFiles are the files config/rbac's kustomization lists, or every
// YAML file of the folder when it has none.
func rbacFiles(dir string) ([]string, error) {
	k, err := readKustomization(filepath.Join(dir, "kustomization.yaml"))
	if err == nil {
		var out []string
		for _, r := range k.Resources {
			out = append(out, filepath.Join(dir, r))
		}
		return out, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	out, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	slices.Sort(out)
	return out, err
}

// readRBACObjects reads the ServiceAccounts, Roles, ClusterRoles and
// bindings of a manifest file (other kinds are not RBAC's business).
func readRBACObjects(path string) ([]client.Object, error) {
	docs, err := yamlDocuments(path)
	if err != nil {
		return nil, err
	}
	var out []client.Object
	for i, doc := range docs {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		var obj client.Object
		switch meta.Kind {
		case "ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "Role":
			obj = &rbacv1.Role{}
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "RoleBinding":
			obj = &rbacv1.RoleBinding{}
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		default:
			continue
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s: document %d (%s): %w", path, i+1, meta.Kind, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// applyPatch merges a strategic-merge patch of an RBAC object into the
// object of the same kind and name: its labels, and a binding's roleRef
// (the fields CAPI's and kubebuilder's patches of RBAC change).
func applyPatch(objs []client.Object, patch client.Object) {
	for _, o := range objs {
		if o.GetName() != patch.GetName() || fmt.Sprintf("%T", o) != fmt.Sprintf("%T", patch) {
			continue
		}
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range patch.GetLabels() {
			labels[k] = v
		}
		o.SetLabels(labels)
		switch p := patch.(type) {
		case *rbacv1.ClusterRoleBinding:
			if p.RoleRef.Name != "" {
				o.(*rbacv1.ClusterRoleBinding).RoleRef = p.RoleRef
			}
		case *rbacv1.RoleBinding:
			if p.RoleRef.Name != "" {
				o.(*rbacv1.RoleBinding).RoleRef = p.RoleRef
			}
		}
	}
}

// prefix gives obj the kustomization's name prefix and namespace, and
// points a binding's role and ServiceAccount subjects at the prefixed
// names, as kustomize's name reference transformer does.
func prefix(obj client.Object, namePrefix, namespace string) {
	obj.SetName(namePrefix + obj.GetName())
	subjects := func(ss []rbacv1.Subject) {
		for i := range ss {
			if ss[i].Kind == rbacv1.ServiceAccountKind {
				ss[i].Name, ss[i].Namespace = namePrefix+ss[i].Name, namespace
			}
		}
	}
	switch o := obj.(type) {
	case *corev1.ServiceAccount, *rbacv1.Role:
		obj.SetNamespace(namespace)
	case *rbacv1.RoleBinding:
		o.Namespace = namespace
		o.RoleRef.Name = namePrefix + o.RoleRef.Name
		subjects(o.Subjects)
	case *rbacv1.ClusterRoleBinding:
		o.RoleRef.Name = namePrefix + o.RoleRef.Name
		subjects(o.Subjects)
	}
}

// writeImpersonatingKubeconfig writes a copy of the admin kubeconfig that
// acts as id: every request impersonates its user and groups.
func writeImpersonatingKubeconfig(admin, path string, id *managerIdentity) error {
	cfg, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		return err
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = id.user()
		auth.ImpersonateGroups = id.groups()
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// refusal is the API server's Forbidden for a ServiceAccount, as a
// manager's log prints it: `secrets "x" is forbidden: User
// "system:serviceaccount:NS:SA" cannot get resource "secrets" in API
// group "" in the namespace "ns"` (or `at the cluster scope`). klog and
// zap escape the quotes inside a logged error, so a quote may follow a
// backslash.
var refusal = regexp.MustCompile(`[\w.*/-]+ (?:\\?"[^"\\]*\\?" )?is forbidden: User \\?"system:serviceaccount:[^"\\]*\\?" cannot .*?(?:at the cluster scope|in the namespace \\?"[^"\\]*\\?")`)

// forbiddenLines picks the API server's refusals out of a manager's log,
// one per log line that holds one, unescaped: what a missing RBAC rule
// looks like from the manager's side.
func forbiddenLines(log string) []string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		if !strings.Contains(line, "is forbidden") {
			continue // the regular expression is slow on every line
		}
		if m := refusal.FindString(line); m != "" {
			out = append(out, strings.ReplaceAll(m, `\"`, `"`))
		}
	}
	return out
}

// installIdentities installs every manager's ServiceAccount and RBAC,
// waits until the API server's ClusterRole aggregation has filled the
// aggregated roles, and gives each manager a kubeconfig that acts as its
// ServiceAccount.
func (p *Plane) installIdentities(ctx context.Context, managers []managerSpec, dir string) error {
	var aggregated []string
	for i := range managers {
		m := &managers[i]
		id := m.id
		for _, obj := range id.objects {
			if err := createOrReplace(ctx, p.Client, obj); err != nil {
				return fmt.Errorf("manager %s: installing %T %s: %w", m.name, obj, obj.GetName(), err)
			}
			if cr, ok := obj.(*rbacv1.ClusterRole); ok && cr.AggregationRule != nil {
				aggregated = append(aggregated, cr.Name)
			}
		}
		p.installed = append(p.installed, id.objects...)
		m.user, m.groups = id.user(), id.groups()
		if p.kind != nil {
			continue // a Pod with the ServiceAccount's own token
		}
		m.kubeconfig = filepath.Join(dir, "kubeconfig-"+m.name)
		if err := writeImpersonatingKubeconfig(p.Kubeconfig, m.kubeconfig, id); err != nil {
			return fmt.Errorf("manager %s: kubeconfig: %w", m.name, err)
		}
	}
	return waitAggregated(ctx, p.Client, aggregated)
}

// waitAggregated waits until each aggregated ClusterRole has rules (the
// controller manager's aggregation fills them from the labelled roles).
func waitAggregated(ctx context.Context, c client.Client, names []string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, name := range names {
		for {
			cr := &rbacv1.ClusterRole{}
			err := c.Get(ctx, client.ObjectKey{Name: name}, cr)
			if err == nil && len(cr.Rules) > 0 {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("ClusterRole %s: still no rules after its aggregation (kube-controller-manager's %s controller): %s", name, aggregationController, fmt.Sprint(err))
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// Forbidden is what the API server refused each manager so far for want
// of RBAC, read from the managers' logs: manager name to the refusals
// (log lines). A refusal counts only if the API server's authorizer still
// denies that request now (a SubjectAccessReview for the manager's
// ServiceAccount): a kube-apiserver that has just started refuses every
// request until its RBAC caches have synced, which a restart of it shows,
// and those refusals say nothing about the manager's RBAC. They are
// Transient.
func (p *Plane) Forbidden(ctx context.Context) (denied map[string][]string, transient map[string]int) {
	return p.ForbiddenSince(ctx, nil)
}

// RefusalMark is how many refusals each manager's log held at a moment
// (RefusalsSoFar), for ForbiddenSince.
type RefusalMark map[string]int

// RefusalsSoFar marks where the managers' refusals stand now: a run on a
// plane kept from an earlier run is judged on the refusals after it.
func (p *Plane) RefusalsSoFar() RefusalMark {
	mark := RefusalMark{}
	for _, m := range p.managers {
		if lines, err := p.refusals.read(filepath.Join(p.LogDir, m.name+".log")); err == nil {
			mark[m.name] = len(lines)
		}
	}
	return mark
}

// ForbiddenSince is Forbidden of the refusals after mark (nil: all).
func (p *Plane) ForbiddenSince(ctx context.Context, mark RefusalMark) (denied map[string][]string, transient map[string]int) {
	denied, transient = map[string][]string{}, map[string]int{}
	for _, m := range p.managers {
		lines, err := p.refusals.read(filepath.Join(p.LogDir, m.name+".log"))
		if err != nil {
			continue
		}
		lines = lines[min(mark[m.name], len(lines)):]
		verdicts := map[string]bool{} // a request's attributes: still denied
		for _, line := range lines {
			attrs, ok := parseRefusal(line)
			if !ok {
				denied[m.name] = append(denied[m.name], line) // unreadable: it counts
				continue
			}
			key := fmt.Sprintf("%+v", attrs)
			still, seen := verdicts[key]
			if !seen {
				still = !p.allowed(ctx, m, attrs)
				verdicts[key] = still
			}
			if still {
				denied[m.name] = append(denied[m.name], line)
			} else {
				transient[m.name]++
			}
		}
	}
	return denied, transient
}

// refusalLogs reads the managers' refusals as their logs grow: each call
// reads only what was appended since the last (the logs are opened for
// appending), so the runs sharing a plane, each asking at its end, do not
// each read every log whole (55 runs at once spent more of the harness's
// CPU on that than on their recorders' API reads).
type refusalLogs struct {
	mu   sync.Mutex
	logs map[string]*refusalLog
}

// refusalLog is one log read up to offset: its refusals so far, and the
// start of a line not yet ended.
type refusalLog struct {
	offset  int64
	partial string
	lines   []string
}

// read is every refusal in the log at path so far.
func (r *refusalLogs) read(path string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.logs == nil {
		r.logs = map[string]*refusalLog{}
	}
	l := r.logs[path]
	if l == nil {
		l = &refusalLog{}
		r.logs[path] = l
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() < l.offset {
		*l = refusalLog{} // a new file under the old name: read it whole
	}
	if _, err := f.Seek(l.offset, io.SeekStart); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	l.offset += int64(len(data))
	text := l.partial + string(data)
	end := strings.LastIndexByte(text, '\n') + 1
	l.lines = append(l.lines, forbiddenLines(text[:end])...)
	l.partial = text[end:]
	return slices.Clip(l.lines), nil
}

// refusalAttrs picks a refusal apart: `RESOURCE.GROUP "NAME" is forbidden:
// User "U" cannot VERB resource "RES[/SUB]" in API group "G" (at the
// cluster scope | in the namespace "NS")`.
var refusalAttrs = regexp.MustCompile(`(?:"([^"]*)" )?is forbidden: User "[^"]*" cannot (\S+) resource "([^"/]*)(?:/([^"]*))?" in API group "([^"]*)" (?:at the cluster scope|in the namespace "([^"]*)")`)

func parseRefusal(line string) (authorizationv1.ResourceAttributes, bool) {
	m := refusalAttrs.FindStringSubmatch(line)
	if m == nil {
		return authorizationv1.ResourceAttributes{}, false
	}
	return authorizationv1.ResourceAttributes{Name: m[1], Verb: m[2], Resource: m[3], Subresource: m[4], Group: m[5], Namespace: m[6]}, true
}

// allowed asks the API server whether the manager's ServiceAccount may
// make the request now. An unanswered question is no permission.
func (p *Plane) allowed(ctx context.Context, m managerSpec, attrs authorizationv1.ResourceAttributes) bool {
	if m.user == "" || p.Client == nil {
		return false
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: m.user, Groups: m.groups, ResourceAttributes: &attrs}}
	if err := p.Client.Create(ctx, sar); err != nil {
		return false
	}
	return sar.Status.Allowed
}
