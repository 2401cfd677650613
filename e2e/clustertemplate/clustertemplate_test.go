package clustertemplate

import (
	"strings"
	"testing"
)

const tmpl = `# ${IGNORED} in a comment asks for nothing
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${NAME}
data:
  replicas: "${REPLICAS}"
---
# only a comment
`

func TestRender(t *testing.T) {
	objs, err := RenderBytes("t.yaml", []byte(tmpl), map[string]string{"NAME": "cm", "REPLICAS": "3"})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].GetName() != "cm" || objs[0].Object["data"].(map[string]any)["replicas"] != "3" {
		t.Fatalf("rendered %v", objs)
	}
}

func TestRenderNamesWhatIsMissing(t *testing.T) {
	_, err := RenderBytes("t.yaml", []byte(tmpl), map[string]string{})
	if err == nil || err.Error() != "t.yaml: variables not given: NAME, REPLICAS" {
		t.Fatalf("missing variables: %v", err)
	}
	_, err = RenderBytes("t.yaml", []byte("kind: ConfigMap\nmetadata: {name: x}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "t.yaml: document 1: apiVersion, kind and metadata.name are required") {
		t.Fatalf("a document without apiVersion: %v", err)
	}
}

func FuzzRenderBytes(f *testing.F) {
	f.Add([]byte(tmpl), "cm")
	f.Add([]byte("a: [\n"), "")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		objs, err := RenderBytes("f.yaml", data, map[string]string{"NAME": name, "REPLICAS": "1"})
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.GetKind() == "" || o.GetName() == "" || o.GetAPIVersion() == "" {
				t.Fatalf("rendered an object without identity: %v", o.Object)
			}
		}
	})
}
