package v1

// MACParam is the query parameter the firmware appends to the boot
// server's URL: the MAC of the port that booted, as iPXE's ${mac}.
const MACParam = "mac"

// Magic is a script's first line.
const Magic = "#!ipxe"

// Script is one boot script: Chain loads and boots the image at an HTTP
// URL; with Chain empty the script exits and the firmware tries its next
// boot device (what Ironic's default script does for a host it does not
// deploy, so the host boots its disk).
type Script struct {
	Chain string
}

// String is Format as a string.
func (s Script) String() string { return string(s.Format()) }

// Format writes s in iPXE's syntax.
func (s Script) Format() []byte {
	if s.Chain == "" {
		return []byte(Magic + "\nexit\n")
	}
	return []byte(Magic + "\nchain " + s.Chain + "\n")
}
