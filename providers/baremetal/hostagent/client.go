package hostagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
)

// Client calls one agent at its base URL.
type Client struct {
	http *http.Client
	base string
}

// New makes a client; httpClient carries the provider's client
// certificate and trusts the agents' CA.
func New(httpClient *http.Client, base string) *Client {
	return &Client{http: httpClient, base: base}
}

// Error is an agent's refusal, with its status code and message.
type Error struct {
	Call    string
	Status  int
	Message string
	body    []byte
}

func (e *Error) Error() string {
	return fmt.Sprintf("host agent %s: %d: %s", e.Call, e.Status, e.Message)
}

func (c *Client) do(ctx context.Context, method, path string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("host agent %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		if e.Error == "" {
			e.Error = string(data)
		}
		return &Error{Call: method + " " + path, Status: resp.StatusCode, Message: e.Error, body: data}
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func jsonBody(v any) io.Reader {
	data, _ := json.Marshal(v)
	return bytes.NewReader(data)
}

// Status reads what runs and what the disk holds (Images: booted, staged,
// fallback).
func (c *Client) Status(ctx context.Context) (agentv1.Status, error) {
	var s agentv1.Status
	err := c.do(ctx, http.MethodGet, "/v1/status", nil, &s)
	return s, err
}

// Inventory reads the hardware in band (the OS's view: CPUs, memory,
// NICs with their leases and NVM versions).
func (c *Client) Inventory(ctx context.Context) (agentv1.Inventory, error) {
	var inv agentv1.Inventory
	err := c.do(ctx, http.MethodGet, agentv1.PathInventory, nil, &inv)
	return inv, err
}

// Stage writes an image into the root the host stages into, verified
// against sha256 first, and answers that root.
func (c *Client) Stage(ctx context.Context, url, sha256 string) (agentv1.RootID, error) {
	var res agentv1.StageResult
	err := c.do(ctx, http.MethodPost, "/v1/stage", jsonBody(agentv1.StageRequest{URL: url, SHA256: sha256}), &res)
	return res.Root, err
}

// WriteConfigDrive stores the OS's user data and meta data.
func (c *Client) WriteConfigDrive(ctx context.Context, userData []byte, metaData map[string]string) error {
	return c.do(ctx, http.MethodPut, "/v1/configdrive", jsonBody(agentv1.ConfigDrive{UserData: userData, MetaData: metaData}), nil)
}

// Activate makes a staged root boot next with tries attempts before the
// bootloader falls back.
func (c *Client) Activate(ctx context.Context, root agentv1.RootID, tries int) error {
	return c.do(ctx, http.MethodPost, "/v1/activate", jsonBody(agentv1.ActivateRequest{Root: root, Tries: tries}), nil)
}

// Rollback makes the committed fallback image boot next.
func (c *Client) Rollback(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/rollback", nil, nil)
}

// Etc reads the running OS's /etc (path to content).
func (c *Client) Etc(ctx context.Context) (map[string]string, error) {
	etc := map[string]string{}
	err := c.do(ctx, http.MethodGet, "/v1/etc", nil, &etc)
	return etc, err
}

// WriteEtc edits one file of the running OS's /etc, as an admin does
// ("" deletes it), and answers the whole /etc.
func (c *Client) WriteEtc(ctx context.Context, path, content string) (map[string]string, error) {
	etc := map[string]string{}
	err := c.do(ctx, http.MethodPut, "/v1/etc", jsonBody(agentv1.EtcEdit{Path: path, Content: content}), &etc)
	return etc, err
}

// Clean erases the disk (deploy ramdisk only).
func (c *Client) Clean(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/clean", nil, nil)
}

// Reboot restarts the host from its OS.
func (c *Client) Reboot(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/reboot", nil, nil)
}

// KubeadmUpgrade runs kubeadm upgrade node on a control-plane host and
// returns what it applied.
func (c *Client) KubeadmUpgrade(ctx context.Context) (agentv1.Kubeadm, error) {
	var k agentv1.Kubeadm
	err := c.do(ctx, http.MethodPost, "/v1/kubeadm/upgrade", nil, &k)
	return k, err
}

// WriteFiles writes files (path to content) on the running OS and
// returns every file the host has, path to the SHA-256 of its content.
func (c *Client) WriteFiles(ctx context.Context, files map[string]string) (map[string]string, error) {
	var sums map[string]string
	err := c.do(ctx, http.MethodPut, "/v1/files", jsonBody(agentv1.FilesRequest{Files: files}), &sums)
	return sums, err
}

// Reset reboots into recovery, which wipes and reinstalls the host.
func (c *Client) Reset(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/reset", nil, nil)
}

// Health runs the OS's health check, which commits the running slot when
// it passes. An unhealthy host is an answer, not an error.
func (c *Client) Health(ctx context.Context) (agentv1.Health, error) {
	var h agentv1.Health
	err := c.do(ctx, http.MethodPost, "/v1/health", nil, &h)
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusServiceUnavailable {
		if json.Unmarshal(e.body, &h) != nil || h.Reason == "" {
			h.Reason = e.Message
		}
		h.Healthy = false
		return h, nil
	}
	return h, err
}
