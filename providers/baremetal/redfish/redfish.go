package redfish

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/common"
	"github.com/stmcginnis/gofish/redfish"
)

// AddressScheme is the BareMetalHost bmc.address scheme this package
// drives (Metal3 names the same driver so).
const AddressScheme = "redfish-virtualmedia+"

// Address is a parsed bmc.address.
type Address struct {
	// Endpoint is the service's base URL (https://host:port).
	Endpoint string
	// SystemPath is the ComputerSystem's path (/redfish/v1/Systems/ID).
	SystemPath string
}

// ParseAddress reads redfish-virtualmedia+https://HOST:PORT/redfish/v1/Systems/ID.
func ParseAddress(addr string) (Address, error) {
	rest, ok := strings.CutPrefix(addr, AddressScheme)
	if !ok {
		return Address{}, fmt.Errorf("bmc address %q: want scheme %shttps", addr, AddressScheme)
	}
	u, err := url.Parse(rest)
	if err != nil {
		return Address{}, fmt.Errorf("bmc address %q: %w", addr, err)
	}
	if u.Scheme != "https" || u.Host == "" || !strings.HasPrefix(u.Path, "/redfish/v1/Systems/") {
		return Address{}, fmt.Errorf("bmc address %q: want %shttps://HOST:PORT/redfish/v1/Systems/ID", addr, AddressScheme)
	}
	return Address{Endpoint: u.Scheme + "://" + u.Host, SystemPath: u.Path}, nil
}

// ErrCredentials means the BMC refused the username and password.
var ErrCredentials = errors.New("the BMC refused the credentials")

// Client is one connection to one BMC's system.
type Client struct {
	api *gofish.APIClient
	sys *redfish.ComputerSystem
}

// Dial connects with Basic auth (no session to leak when the provider
// restarts) and reads the system, which checks the credentials.
func Dial(addr Address, username, password string, httpClient *http.Client) (*Client, error) {
	api, err := gofish.Connect(gofish.ClientConfig{
		Endpoint: addr.Endpoint, Username: username, Password: password,
		BasicAuth: true, HTTPClient: keepingConnections(httpClient),
	})
	if err != nil {
		return nil, fmt.Errorf("BMC %s: %w", addr.Endpoint, err)
	}
	sys, err := redfish.GetComputerSystem(api, addr.SystemPath)
	if err != nil {
		if isStatus(err, http.StatusUnauthorized) || isStatus(err, http.StatusForbidden) {
			return nil, fmt.Errorf("BMC %s: %w", addr.Endpoint, ErrCredentials)
		}
		return nil, fmt.Errorf("BMC %s: reading %s: %w", addr.Endpoint, addr.SystemPath, err)
	}
	return &Client{api: api, sys: sys}, nil
}

// keepingConnections is httpClient with its connections kept between
// requests. gofish marks every request "Connection: close" unless it
// built the http.Client itself (ClientConfig.ReuseConnections applies
// only then), and this one carries the BMCs' CA and sushy's retries.
// Ironic's sushy keeps its connections (a requests.Session per BMC), so
// a BMC sees one TLS handshake per client, not one per read.
func keepingConnections(httpClient *http.Client) *http.Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	c := *httpClient
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = keepAlive{next}
	return &c
}

type keepAlive struct{ next http.RoundTripper }

func (k keepAlive) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Close {
		req = req.Clone(req.Context())
		req.Close = false
	}
	return k.next.RoundTrip(req)
}

func isStatus(err error, code int) bool {
	var e *common.Error
	return errors.As(err, &e) && e.HTTPReturnedStatusCode == code
}

// Close lets the client go. Basic auth holds no session to end, and the
// TLS connection stays in the shared http.Client's pool for the next
// Dial to the same BMC, as Ironic keeps its sushy clients between
// periodic power syncs (gofish's Logout would close every idle
// connection of the shared client, to every BMC).
func (c *Client) Close() {}

// SystemID is the Redfish System Id, the host's name.
func (c *Client) SystemID() string { return c.sys.ID }

// PoweredOn reads the power state as of Dial, or as this client last set
// it (PowerOn, PowerOff).
func (c *Client) PoweredOn() bool { return c.sys.PowerState == redfish.OnPowerState }

// PowerOn turns the server on, or restarts it when it is on, so it boots
// again either way.
func (c *Client) PowerOn() error {
	if c.PoweredOn() {
		return c.sys.Reset(redfish.ForceRestartResetType)
	}
	if err := c.sys.Reset(redfish.OnResetType); err != nil {
		return err
	}
	c.sys.PowerState = redfish.OnPowerState
	return nil
}

// Restart restarts a server that is on gracefully (GracefulRestart: the
// OS shuts down first, so an OSTree host finalises its staged deployment)
// and turns one that is off on.
func (c *Client) Restart() error {
	if c.PoweredOn() {
		return c.sys.Reset(redfish.GracefulRestartResetType)
	}
	return c.sys.Reset(redfish.OnResetType)
}

// GracefulShutdown asks the OS to shut down (Ironic's soft power off).
// The BMC only signals the OS: the caller reads the power state to learn
// whether it did.
func (c *Client) GracefulShutdown() error {
	if !c.PoweredOn() {
		return nil
	}
	return c.sys.Reset(redfish.GracefulShutdownResetType)
}

// NICs reads the system's Ethernet interfaces, by name, with the
// addresses the BMC knows.
func (c *Client) NICs() ([]NIC, error) {
	ifaces, err := c.sys.EthernetInterfaces()
	if err != nil {
		return nil, fmt.Errorf("Ethernet interfaces: %w", err)
	}
	var nics []NIC
	for _, i := range ifaces {
		n := NIC{Name: i.ID, MAC: i.MACAddress, Up: i.LinkStatus == redfish.LinkUpLinkStatus}
		if len(i.IPv4Addresses) > 0 {
			n.IP = i.IPv4Addresses[0].Address
		}
		nics = append(nics, n)
	}
	sort.Slice(nics, func(a, b int) bool { return nics[a].Name < nics[b].Name })
	return nics, nil
}

// PowerOff turns the server off at once (Ironic's hard power off).
func (c *Client) PowerOff() error {
	if !c.PoweredOn() {
		return nil
	}
	if err := c.sys.Reset(redfish.ForceOffResetType); err != nil {
		return err
	}
	c.sys.PowerState = redfish.OffPowerState
	return nil
}

// BootOnce makes the next boot use target (Cd, Hdd).
func (c *Client) BootOnce(target redfish.BootSourceOverrideTarget) error {
	return c.sys.SetBoot(redfish.Boot{BootSourceOverrideTarget: target, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled})
}

func (c *Client) cd() (*redfish.VirtualMedia, error) {
	managers, err := c.sys.ManagedBy()
	if err != nil {
		return nil, err
	}
	for _, m := range managers {
		media, err := m.VirtualMedia()
		if err != nil {
			return nil, err
		}
		for _, vm := range media {
			for _, t := range vm.MediaTypes {
				if t == redfish.CDMediaType || t == redfish.DVDMediaType {
					return vm, nil
				}
			}
		}
	}
	return nil, errors.New("the BMC offers no virtual CD")
}

// InsertMedia puts image into the virtual CD, replacing what is there.
func (c *Client) InsertMedia(image string) error {
	vm, err := c.cd()
	if err != nil {
		return err
	}
	if vm.Inserted {
		if vm.Image == image {
			return nil
		}
		if err := vm.EjectMedia(); err != nil {
			return fmt.Errorf("ejecting %s: %w", vm.Image, err)
		}
	}
	return vm.InsertMedia(image, true, true)
}

// EjectMedia empties the virtual CD.
func (c *Client) EjectMedia() error {
	vm, err := c.cd()
	if err != nil {
		return err
	}
	if !vm.Inserted {
		return nil
	}
	return vm.EjectMedia()
}

// Hardware is what inspection learns.
type Hardware struct {
	CPUs      int
	MemoryMiB int
	Serial    string
	NICs      []NIC
	// Firmware maps inventory Id (BIOS, BMC, NIC.<port>) to its version.
	Firmware map[string]string
}

// NIC is one Ethernet interface.
type NIC struct {
	Name string
	MAC  string
	Up   bool
	// IP is the interface's first IPv4 address, as the BMC knows it
	// (only while the host's OS runs with link).
	IP string
}

// Inspect reads the system, its Ethernet interfaces and the firmware
// inventory.
func (c *Client) Inspect() (Hardware, error) {
	hw := Hardware{
		CPUs: c.sys.ProcessorSummary.Count, MemoryMiB: int(c.sys.MemorySummary.TotalSystemMemoryGiB * 1024),
		Serial: c.sys.SerialNumber, Firmware: map[string]string{},
	}
	nics, err := c.NICs()
	if err != nil {
		return hw, err
	}
	hw.NICs = nics
	us, err := c.api.Service.UpdateService()
	if err != nil {
		return hw, fmt.Errorf("update service: %w", err)
	}
	inv, err := us.FirmwareInventories()
	if err != nil {
		return hw, fmt.Errorf("firmware inventory: %w", err)
	}
	for _, item := range inv {
		hw.Firmware[item.ID] = item.Version
	}
	return hw, nil
}

// StageFirmware asks the BMC to apply the package at imageURI to one
// firmware inventory item (e.g. "NIC.eno1") at the system's next reset
// (SimpleUpdate with @Redfish.OperationApplyTime OnReset), so the flash
// happens while no OS drives the device. gofish's SimpleUpdateParameters
// has no apply time, so the action is posted as Redfish defines it.
func (c *Client) StageFirmware(imageURI, item string) error {
	us, err := c.api.Service.UpdateService()
	if err != nil {
		return fmt.Errorf("update service: %w", err)
	}
	inv := strings.TrimSuffix(us.ODataID, "/") + "/FirmwareInventory/" + item
	resp, err := c.api.Post(strings.TrimSuffix(us.ODataID, "/")+"/Actions/UpdateService.SimpleUpdate", map[string]any{
		"ImageURI": imageURI, "Targets": []string{inv},
		"@Redfish.OperationApplyTime": string(redfish.OnResetOperationApplyTime),
	})
	if err != nil {
		return fmt.Errorf("SimpleUpdate %s with %s: %w", item, imageURI, err)
	}
	resp.Body.Close()
	return nil
}
