package ironic

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/upgradelab/upgradelab/internal/jsonhttp"
)

// APIVersion is the microversion the Client asks for: baremetal-operator
// v0.11's floor (1.81), which every Ironic the harness accepts offers
// (Debian 12's offers 1.82).
const APIVersion = "1.81"

// Client calls Ironic's REST API.
type Client struct {
	URL  string
	HTTP *http.Client
}

// NewClient is a Client of the Ironic at url.
func NewClient(url string) *Client {
	return &Client{URL: url, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// Node is what the harness reads of an Ironic node.
type Node struct {
	UUID                 string            `json:"uuid"`
	Name                 string            `json:"name"`
	Driver               string            `json:"driver"`
	ProvisionState       string            `json:"provision_state"`
	TargetProvisionState *string           `json:"target_provision_state"`
	PowerState           *string           `json:"power_state"`
	LastError            *string           `json:"last_error"`
	Maintenance          bool              `json:"maintenance"`
	Properties           map[string]any    `json:"properties"`
	DriverInfo           map[string]any    `json:"driver_info"`
	InstanceInfo         map[string]any    `json:"instance_info"`
	Extra                map[string]string `json:"extra"`
}

// Nodes lists every node with its details.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	var out struct {
		Nodes []Node `json:"nodes"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/nodes?detail=true", nil, &out)
	return out.Nodes, err
}

// Node reads one node by name or UUID.
func (c *Client) Node(ctx context.Context, ident string) (*Node, error) {
	n := &Node{}
	return n, c.Do(ctx, http.MethodGet, "/v1/nodes/"+ident, nil, n)
}

// Version is the API's highest microversion.
func (c *Client) Version(ctx context.Context) (string, error) {
	var root struct {
		Default struct {
			Version string `json:"version"`
		} `json:"default_version"`
	}
	err := c.Do(ctx, http.MethodGet, "/", nil, &root)
	return root.Default.Version, err
}

// Do sends body (JSON, nil for none) to path and decodes the answer into
// out (nil: discarded). An answer of 400 or more is an error carrying
// Ironic's message.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	req, err := jsonhttp.NewRequest(ctx, method, c.URL+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", APIVersion)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("ironic %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 400 {
		return fmt.Errorf("ironic %s %s: %s: %s", method, path, resp.Status, errorMessage(data))
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	return json.Unmarshal(data, out)
}

// errorMessage is Ironic's error_message (a JSON string holding JSON with
// a faultstring), or the body as it came.
func errorMessage(body []byte) string {
	var outer struct {
		ErrorMessage string `json:"error_message"`
	}
	if json.Unmarshal(body, &outer) != nil || outer.ErrorMessage == "" {
		return string(body)
	}
	var inner struct {
		Faultstring string `json:"faultstring"`
	}
	if json.Unmarshal([]byte(outer.ErrorMessage), &inner) == nil && inner.Faultstring != "" {
		return inner.Faultstring
	}
	return outer.ErrorMessage
}
