package specfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Decode reads one YAML document from data into v (with `yaml` tags);
// name, usually the file path, prefixes every error.
func Decode(name string, data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: empty document", name)
		}
		return fmt.Errorf("%s: %s", name, tidy(err))
	}
	return nil
}

var notFound = regexp.MustCompile(`field (\S+) not found in type \S+`)

// tidy turns yaml.v3's "yaml: unmarshal errors:\n  line 5: field colour not
// found in type nic.Rule" into "line 5: unknown field \"colour\"".
func tidy(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	msg = notFound.ReplaceAllString(msg, `unknown field "$1"`)
	lines := strings.Split(msg, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

// Problems collects what a caller's validation finds wrong with a
// decoded file, each as "field: problem", in the order found.
type Problems []string

// Add records a problem of field.
func (p *Problems) Add(field, format string, args ...any) {
	*p = append(*p, field+": "+fmt.Sprintf(format, args...))
}
