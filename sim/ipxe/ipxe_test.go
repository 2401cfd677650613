package ipxe

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	netbootv1 "github.com/upgradelab/upgradelab/api/netboot/v1"
)

// server is a boot server's files by URL; a URL it lacks is a 404, and
// a URL in failFirst fails that many times before it answers.
type server struct {
	files     map[string]string
	failFirst map[string]int
	fetched   []string
	slept     []time.Duration
	echoed    []string
}

func (s *server) env(mac string, nics ...string) Env {
	return Env{MAC: mac, NICs: nics,
		Fetch: func(_ context.Context, url string) ([]byte, error) {
			s.fetched = append(s.fetched, url)
			if s.failFirst[url] > 0 {
				s.failFirst[url]--
				return nil, fmt.Errorf("%s: connection timed out", url)
			}
			b, ok := s.files[url]
			if !ok {
				return nil, fmt.Errorf("%s: 404 Not Found", url)
			}
			return []byte(b), nil
		},
		Sleep: func(_ context.Context, d time.Duration) error { s.slept = append(s.slept, d); return nil },
		Echo:  func(l string) { s.echoed = append(s.echoed, l) },
	}
}

// The boot server's entry script loops over the host's ports, chaining
// each one's config by its MAC in hyphenated form until one exists; a
// port without a config is skipped. These scripts are written for the
// test, in the constructs a provisioner's boot scripts use.
const entry = `#!ipxe
# try every port
set n:int32 -1
:next
inc n || chain cfg/${mac:hexhyp} || goto fail
isset ${net${n}/mac} || goto none
echo trying ${net${n}/mac:hexhyp}
chain cfg/${net${n}/mac:hexhyp} || goto next
echo the config returned: on to the next boot device
exit 0

:none
echo no config for any port
prompt --timeout 180
reboot

:fail
poweroff
`

const deployConfig = `#!ipxe
set tries:int32 3
set i:int32 0
goto deploy

:deploy
imgfree
kernel http://boot/n1/kernel console=ttyS0 BOOTIF=${mac} initrd=ramdisk || goto retry
initrd http://boot/n1/ramdisk || goto retry
boot

:retry
iseq ${i} ${tries} && goto fail ||
inc i
sleep ${i}
goto deploy

:fail
poweroff

:disk
sanboot --no-describe || exit 0
`

const (
	mac0 = "52:54:00:00:00:01"
	mac1 = "52:54:00:00:00:02"
)

func TestThePortLoopBootsTheKernelOfTheFirstPortWithAConfig(t *testing.T) {
	s := &server{files: map[string]string{
		"http://boot/boot.ipxe":                 entry,
		"http://boot/cfg/52-54-00-00-00-02":     deployConfig,
		"http://boot/n1/kernel":                 "KERNEL",
		"http://boot/n1/ramdisk":                "RAMDISK",
		"http://boot/cfg/52-54-00-00-00-01.bak": "unused",
	}}
	out := Run(context.Background(), s.env(mac0, mac0, mac1), "http://boot/boot.ipxe")
	if out.End != Boot || out.Err != nil {
		t.Fatalf("ended %s, %v; want a boot", out.End, out.Err)
	}
	if out.Kernel != "http://boot/n1/kernel" || string(out.Image) != "KERNEL" || out.Initrd != "http://boot/n1/ramdisk" {
		t.Errorf("booted %s (%q) with initrd %s", out.Kernel, out.Image, out.Initrd)
	}
	if want := "console=ttyS0 BOOTIF=" + mac0 + " initrd=ramdisk"; out.Args != want {
		t.Errorf("command line %q, want %q", out.Args, want)
	}
	if got := strings.Join(s.echoed, "|"); got != "trying 52-54-00-00-00-01|trying 52-54-00-00-00-02" {
		t.Errorf("echoed %q", got)
	}
}

func TestKernelFetchesAreRetriedThenTheHostPowersOff(t *testing.T) {
	files := map[string]string{
		"http://boot/cfg":       deployConfig,
		"http://boot/n1/kernel": "KERNEL", "http://boot/n1/ramdisk": "RAMDISK",
	}
	s := &server{files: files, failFirst: map[string]int{"http://boot/n1/kernel": 2}}
	out := Run(context.Background(), s.env(mac0, mac0), "http://boot/cfg")
	if out.End != Boot || fmt.Sprint(s.slept) != "[1s 2s]" {
		t.Errorf("after two failed fetches: ended %s (%v), slept %v; want a boot after 1s and 2s", out.End, out.Err, s.slept)
	}
	s = &server{files: files, failFirst: map[string]int{"http://boot/n1/ramdisk": 10}}
	out = Run(context.Background(), s.env(mac0, mac0), "http://boot/cfg")
	if out.End != PowerOff || fmt.Sprint(s.slept) != "[1s 2s 3s]" {
		t.Errorf("with the initrd never there: ended %s (%v), slept %v; want a poweroff after 1s, 2s and 3s", out.End, out.Err, s.slept)
	}
}

func TestAScriptLeavesForTheNextBootDevice(t *testing.T) {
	for _, c := range []struct {
		name, script string
		end          End
		err          string
	}{
		{"exit", "#!ipxe\nexit\n", Exit, ""},
		{"exit 1", "#!ipxe\nexit 1\n", Exit, "line 2: exit 1"},
		{"the end of the script", "#!ipxe\necho hi\n", Exit, ""},
		{"a failed line", "#!ipxe\nboot\necho unreached\n", Exit, "line 2: boot: no kernel loaded"},
		{"an unknown command", "#!ipxe\n\nimgtrust --permanent\n", Exit, "line 3: imgtrust: command not found"},
		{"a missing label", "#!ipxe\ngoto nowhere\n", Exit, "line 2: goto nowhere: no such label"},
		{"sanboot without a drive", "#!ipxe\nsanboot --no-describe\n", Exit, "sanboot: no SAN drive"},
		{"sanboot or exit 0", "#!ipxe\nsanboot --no-describe || exit 0\nreboot\n", Exit, ""},
		{"a loop", "#!ipxe\n:a\ngoto a\n", Exit, "ran 10000 commands without booting"},
		{"a prompt", "#!ipxe\nprompt --timeout 180 press a key\nreboot\n", Exit, "prompt: no key pressed"},
		{"a failure ignored", "#!ipxe\niseq a b && reboot ||\npoweroff\n", PowerOff, ""},
		{"and", "#!ipxe\niseq a a && reboot\n", Reboot, ""},
		{"a relative chain of a missing file", "#!ipxe\nchain x/y\n", Exit, "chain: http://boot/x/y: 404"},
	} {
		s := &server{files: map[string]string{"http://boot/s": c.script}}
		out := Run(context.Background(), s.env(mac0, mac0), "http://boot/s")
		if out.End != c.end || (c.err == "") != (out.Err == nil) || (out.Err != nil && !strings.Contains(out.Err.Error(), c.err)) {
			t.Errorf("%s: ended %s, %v; want %s, %q", c.name, out.End, out.Err, c.end, c.err)
		}
	}
}

// A chained script that ends returns success to its chain, so the
// caller's next command runs; the entry script then exits to the disk.
func TestAChainedScriptThatEndsReturnsToItsCaller(t *testing.T) {
	s := &server{files: map[string]string{
		"http://boot/boot.ipxe":             entry,
		"http://boot/cfg/52-54-00-00-00-01": "#!ipxe\ngoto disk\n:disk\nsanboot --no-describe || exit 0\n",
	}}
	out := Run(context.Background(), s.env(mac0, mac0, mac1), "http://boot/boot.ipxe")
	if out.End != Exit || out.Err != nil || s.echoed[len(s.echoed)-1] != "the config returned: on to the next boot device" {
		t.Errorf("ended %s, %v, echoed %q", out.End, out.Err, s.echoed)
	}
	// No config for any port: the prompt times out (180 ms) and fails
	// the script, which leaves for the next device before its reboot.
	s = &server{files: map[string]string{"http://boot/boot.ipxe": entry}}
	out = Run(context.Background(), s.env(mac0, mac0, mac1), "http://boot/boot.ipxe")
	if out.End != Exit || out.Err == nil || fmt.Sprint(s.slept) != "[180ms]" {
		t.Errorf("with no config: ended %s, %v, slept %v", out.End, out.Err, s.slept)
	}
}

// The scripts of api/netboot/v1 run: a chained image boots with its URL,
// exit leaves for the next device.
func TestTheWireAPIsScriptsRun(t *testing.T) {
	s := &server{files: map[string]string{
		"http://boot/a":                   netbootv1.Script{Chain: "http://img/deploy?ipa-api-url=x"}.String(),
		"http://boot/b":                   netbootv1.Script{}.String(),
		"http://img/deploy?ipa-api-url=x": "IMAGE",
	}}
	if out := Run(context.Background(), s.env(mac0, mac0), "http://boot/a"); out.End != Boot || out.Kernel != "http://img/deploy?ipa-api-url=x" || string(out.Image) != "IMAGE" {
		t.Errorf("a chain script: %+v", out)
	}
	if out := Run(context.Background(), s.env(mac0, mac0), "http://boot/b"); out.End != Exit || out.Err != nil {
		t.Errorf("an exit script: %+v", out)
	}
}

// FuzzRunScript: any script ends, booting, leaving or failing, without
// a panic and within its command budget.
func FuzzRunScript(f *testing.F) {
	f.Add(entry)
	f.Add(deployConfig)
	f.Add("#!ipxe\nset a ${b${c}}\ninc a || goto x\n:x\nchain ${a}\n")
	f.Add("#!ipxe\n${}\n&& || ||\n")
	f.Fuzz(func(t *testing.T, script string) {
		s := &server{files: map[string]string{"http://boot/s": Magic + "\n" + script, "http://boot/n1/kernel": "K", "http://boot/n1/ramdisk": "R"}}
		out := Run(context.Background(), s.env(mac0, mac0, mac1), "http://boot/s")
		switch out.End {
		case Boot:
			if out.Kernel == "" {
				t.Fatalf("booted no kernel: %+v", out)
			}
		case Exit, Reboot, PowerOff:
		default:
			t.Fatalf("ended %q", out.End)
		}
	})
}

func TestASettingThatSpellsAReferenceStops(t *testing.T) {
	s := &server{files: map[string]string{"http://boot/s": "#!ipxe\nset a $\necho ${a}{a}\nreboot\n"}}
	if out := Run(context.Background(), s.env(mac0, mac0), "http://boot/s"); out.End != Reboot {
		t.Errorf("ended %+v", out)
	}
}
