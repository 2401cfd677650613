package jsonhttp

import (
	"context"
	"io"
	"testing"
)

// A request carries its body as JSON with its content type; a nil body
// is no body and no content type.
func TestNewRequestCarriesJSON(t *testing.T) {
	req, err := NewRequest(context.Background(), "POST", "http://127.0.0.1:1/x", map[string]int{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(req.Body)
	if string(b) != `{"a":1}` || req.Header.Get("Content-Type") != "application/json" {
		t.Errorf("body %q, content type %q", b, req.Header.Get("Content-Type"))
	}
	if req, err = NewRequest(context.Background(), "GET", "http://127.0.0.1:1/x", nil); err != nil || req.Body != nil || req.Header.Get("Content-Type") != "" {
		t.Errorf("a request without a body: %v, body %v, content type %q", err, req.Body, req.Header.Get("Content-Type"))
	}
	if _, err := NewRequest(context.Background(), "POST", "http://127.0.0.1:1/x", func() {}); err == nil {
		t.Error("a body JSON cannot hold was sent")
	}
}
