package specfile

import (
	"strings"
	"testing"
)

type sample struct {
	Name  string `yaml:"name"`
	Count int    `yaml:"count"`
}

func TestDecodeNamesFileLineAndField(t *testing.T) {
	var s sample
	err := Decode("labs/x.yaml", []byte("name: a\ncolour: red\n"), &s)
	if err == nil || err.Error() != `labs/x.yaml: line 2: unknown field "colour"` {
		t.Fatalf("got %v", err)
	}
	err = Decode("labs/x.yaml", []byte("count: many\n"), &s)
	if err == nil || !strings.HasPrefix(err.Error(), "labs/x.yaml: line 1: cannot unmarshal") {
		t.Fatalf("got %v", err)
	}
	if err := Decode("e.yaml", nil, &s); err == nil || err.Error() != "e.yaml: empty document" {
		t.Fatalf("got %v", err)
	}
	if err := Decode("ok.yaml", []byte("name: a\ncount: 2\n"), &s); err != nil || s != (sample{"a", 2}) {
		t.Fatalf("got %+v, %v", s, err)
	}
}
