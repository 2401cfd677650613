package ironic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"
)

// compat sits between baremetal-operator v0.11 and this Ironic. BMO sends
// "disable_power_off": false on every node it creates (its client's field
// is a pointer, which omitempty keeps), a field Ironic 21.4's node schema
// does not know (it came with API 1.95) and refuses with 400, so no host
// would ever register. false is what Ironic does anyway, so compat drops
// the field when it is false; true passes and is refused, as it should
// be. Everything else passes untouched.
func compat(target *url.URL) http.Handler {
	proxy := httputil.NewSingleHostReverseProxy(target)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/nodes" {
			if err := dropDisablePowerOff(r); err != nil {
				http.Error(w, fmt.Sprintf(`{"error_message": %q}`, err.Error()), http.StatusBadRequest)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	})
}

// dropDisablePowerOff removes "disable_power_off": false from a node
// creation's body.
func dropDisablePowerOff(r *http.Request) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	var node map[string]json.RawMessage
	if json.Unmarshal(body, &node) == nil && string(node["disable_power_off"]) == "false" {
		delete(node, "disable_power_off")
		if body, err = json.Marshal(node); err != nil {
			return err
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// serveCompat serves compat on port, in front of the API at apiURL.
func (ir *Ironic) serveCompat(port int, apiURL string) error {
	target, err := url.Parse(apiURL)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("ironic's API for baremetal-operator: %w", err)
	}
	ir.compat = &http.Server{Handler: compat(target), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ir.compat.Serve(ln) }()
	return nil
}
