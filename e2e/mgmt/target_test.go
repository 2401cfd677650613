package mgmt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		value   string
		want    Target
		wantErr string
	}{
		{value: "", want: Target{Kind: Embedded}},
		{value: "embedded", want: Target{Kind: Embedded}},
		{value: "kubeconfig=" + kubeconfig, want: Target{Kind: ExistingCluster, Kubeconfig: kubeconfig}},
		{value: "kubeconfig=", wantErr: "needs a file path"},
		{value: "kubeconfig=/does/not/exist", wantErr: "no such file"},
		{value: "kind", want: Target{Kind: KindCluster, Cluster: DefaultKindCluster}},
		{value: "kind=ci-2", want: Target{Kind: KindCluster, Cluster: "ci-2"}},
		{value: "kind=Bad_Name", wantErr: "kind cluster name"},
		{value: "kind=", wantErr: "kind cluster name"},
		{value: "docker", wantErr: `unknown value; use "embedded"`},
		{value: "Embedded", wantErr: "unknown value"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			got, err := ParseTarget(tt.value)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTarget(%q) error = %v, want it to contain %q", tt.value, err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), "--management") {
					t.Errorf("error %q does not name the flag", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseTarget(%q) = %+v, %v; want %+v", tt.value, got, err, tt.want)
			}
		})
	}
}
