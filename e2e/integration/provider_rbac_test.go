package integration

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/labtest"
)

// A provider missing an RBAC rule is refused by the API server, and the
// harness names the manager and the refusal: the provider's config with
// the role controller-gen writes when the secrets markers are removed
// (its rules without secrets), a host enrolled with BMC credentials in a
// Secret, and rbac-sufficient fails naming "secrets".
func TestAProviderMissingAnRBACRuleIsRefusedAndNamed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	config := copyConfigWithout(t, "secrets")
	e := startEnv(t, ctx, envOptions{lab: "single-node", scale: 0.01, providerConfig: config})
	if _, err := reference.Enroll(ctx, e.c, e.site, e.ns, func(lab.HostInfo) bool { return true }); err != nil {
		t.Fatal(err)
	}
	var forbidden []string
	for ctx.Err() == nil && len(forbidden) == 0 {
		denied, _ := e.plane.Forbidden(ctx)
		forbidden = denied["baremetal"]
		time.Sleep(200 * time.Millisecond)
	}
	if len(forbidden) == 0 {
		t.Fatal("the provider without its secrets rule was never refused")
	}
	if !strings.Contains(forbidden[0], `resource "secrets"`) || !strings.Contains(forbidden[0], `User "system:serviceaccount:upgradelab-baremetal-system:upgradelab-baremetal-manager"`) {
		t.Fatalf("the refusal does not name the resource and the manager's ServiceAccount: %s", forbidden[0])
	}
	// The rule over what the run records.
	tl, err := timeline.Create(filepath.Join(labtest.Dir(t), "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	tl.Add(timeline.Entry{Kind: check.KindForbidden, Name: "baremetal", New: map[string]string{check.FieldCount: "1", check.FieldFirst: forbidden[0]}})
	judged := false
	for _, r := range check.Run(tl.Entries(), check.Params{RBACEnforced: true}) {
		if r.Rule != "rbac-sufficient" {
			continue
		}
		judged = true
		if r.Status != check.Fail || len(r.Violations) == 0 || !strings.Contains(r.Violations[0].Message, "manager baremetal was refused") {
			t.Fatalf("rbac-sufficient: %s %+v", r.Status, r.Violations)
		}
	}
	if !judged {
		t.Fatal("no rule rbac-sufficient among the checks")
	}
}

// copyConfigWithout copies providers/baremetal/config into a temporary
// folder, its role.yaml without the rules on resource.
func copyConfigWithout(t *testing.T, resource string) string {
	t.Helper()
	src := filepath.Join("..", "..", "providers", "baremetal", "config")
	dst := filepath.Join(t.TempDir(), "config")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	rolePath := filepath.Join(dst, "rbac", "role.yaml")
	data, err := os.ReadFile(rolePath)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(data, role); err != nil {
		t.Fatal(err)
	}
	kept := slices.DeleteFunc(slices.Clone(role.Rules), func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, resource) })
	if len(kept) == len(role.Rules) {
		t.Fatalf("role.yaml has no rule on %s", resource)
	}
	role.Rules = kept
	out, err := yaml.Marshal(role)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rolePath, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}
