package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/vm/boot"
	"github.com/upgradelab/upgradelab/sim/vm/diskimage"
	"github.com/upgradelab/upgradelab/sim/vm/guest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "upgradelab-guest: FATAL:", err)
		time.Sleep(500 * time.Millisecond)
		os.Exit(1)
	}
}

func run() error {
	if os.Getpid() == 1 {
		if err := guest.MountKernelFilesystems(); err != nil {
			return err
		}
		if _, err := guest.LoadModules(boot.InitrdModules); err != nil {
			return err
		}
	}
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return err
	}
	params := guest.KernelParams(string(cmdline))
	var manifest imagev1.Manifest
	if b, err := os.ReadFile(boot.InitrdManifest); err != nil {
		return err
	} else if err := json.Unmarshal(b, &manifest); err != nil {
		return fmt.Errorf("%s: %w", boot.InitrdManifest, err)
	}
	fmt.Printf("upgradelab-guest: started source=%s slot=%s trial=%s image=%s\n",
		params[diskimage.ParamSource], params[diskimage.ParamSlot], params[diskimage.ParamTrial], manifest.Name)

	if err := guest.WaitFor("/dev/vda", 20*time.Second); err != nil {
		return err
	}
	if err := guest.WaitFor("/sys/class/net/eth0", 20*time.Second); err != nil {
		return err
	}
	_, addr, _ := net.ParseCIDR("10.0.2.15/24")
	addr.IP = net.IPv4(10, 0, 2, 15)
	if err := guest.ConfigureNetwork("eth0", addr); err != nil {
		return err
	}
	var booted disk.SlotName
	if params[diskimage.ParamSource] == "disk" {
		booted = disk.SlotName(params[diskimage.ParamSlot])
	}
	d, err := guest.OpenDisk("/dev/vda", booted)
	if err != nil {
		return err
	}
	if cut, err := d.RecoverInterruptedWrites(); err != nil {
		return err
	} else if len(cut) > 0 {
		fmt.Printf("upgradelab-guest: slot %v was being written when power was lost: marked corrupt\n", cut)
	}
	host, _ := os.Hostname()
	if b, err := os.ReadFile("/sys/class/dmi/id/product_serial"); err == nil && strings.TrimSpace(string(b)) != "" {
		host = strings.TrimSpace(string(b))
	}
	srv := &guest.Server{
		Host: host, Disk: d, Params: params, Manifest: manifest, Console: os.Stdout,
		Client:  &http.Client{Timeout: 10 * time.Minute},
		Restart: guest.Restart, PowerOff: guest.PowerOff,
	}
	l, err := net.Listen("tcp", fmt.Sprintf(":%d", guest.Port))
	if err != nil {
		return err
	}
	fmt.Printf("upgradelab-guest: serving the agent API on :%d\n", guest.Port)
	return http.Serve(l, srv.Handler())
}
