package clustertemplate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var variable = regexp.MustCompile(`\$\{([A-Z0-9_]+)\}`)

// Render fills the template at path and decodes its objects.
func Render(path string, vars map[string]string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return RenderBytes(path, data, vars)
}

// RenderBytes is Render of data read from name.
func RenderBytes(name string, data []byte, vars map[string]string) ([]*unstructured.Unstructured, error) {
	missing := map[string]bool{}
	out := variable.ReplaceAllFunc(stripComments(data), func(m []byte) []byte {
		key := string(variable.FindSubmatch(m)[1])
		v, ok := vars[key]
		if !ok {
			missing[key] = true
		}
		return []byte(v)
	})
	if len(missing) > 0 {
		var names []string
		for k := range missing {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("%s: variables not given: %s", name, strings.Join(names, ", "))
	}
	reader := utilyaml.NewYAMLReader(bufioReader(out))
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: document %d: %w", name, i+1, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i+1, err)
		}
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("%s: document %d: apiVersion, kind and metadata.name are required", name, i+1)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// stripComments drops whole-line comments, so a comment may mention
// ${VARIABLES} without asking for them.
func stripComments(doc []byte) []byte {
	var keep [][]byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			keep = append(keep, line)
		}
	}
	return bytes.Join(keep, []byte("\n"))
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
