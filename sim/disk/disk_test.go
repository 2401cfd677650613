package disk

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// step is one thing that happens to a disk, in the update contract's
// terms, and what must follow. Expectations hold for both kinds unless a
// per-kind value is given (the models differ there on purpose).
type step struct {
	// do: stage IMG (write whole) | begin IMG (start a write) | activate N
	// (the staged root) | boot (a graceful reboot: the running OS shuts
	// down, finalising if due, the power goes off and on, the bootloader
	// chooses) | hard-reset (power off and on, no shutdown) | cut-finalise
	// (a power cut while the shutdown finalises) | commit | rollback |
	// powerloss | recovery-once | erase | edit PATH=VALUE.
	do string
	// boots is the image the boot must run ("recovery" for the recovery
	// partition), with trial and, per kind, the bootloader's reason.
	boots  string
	trial  bool
	reason map[Kind]string
	// bootsKind overrides boots per kind ("IMG" or "IMG trial").
	bootsKind map[Kind]string
	// err is the error the step must fail with, per kind when errKind.
	err     error
	errKind map[Kind]error
	// images is Images() after the step, as "booted=X staged=Y
	// fallback=Z" (per kind in imagesKind); etc is a file of the running
	// /etc (per kind: value, "" for absent).
	images     string
	imagesKind map[Kind]string
	etc        map[Kind]map[string]string
	// roots is every root's image after the step, sorted, per kind.
	roots map[Kind]string
}

func both(v string) map[Kind]string { return map[Kind]string{AB: v, OSTree: v} }

// rootMiB gives both kinds the same disk budget: two 2 GiB slots, or one
// 4 GiB root for every deployment. Images are 1000 MiB, "os-huge" 3000.
var rootMiB = map[Kind]int{AB: 2048, OSTree: 4096}

func sizeOf(image string) int {
	if strings.Contains(image, "huge") {
		return 3000
	}
	return 1000
}

// installed is a disk with image booted and committed.
func installed(image string) []step {
	return []step{
		{do: "stage " + image},
		{do: "activate 1"},
		{do: "boot", boots: image, trial: true},
		{do: "commit"},
	}
}

// updated is installed plus a committed update to image.
func updated(from, to string) []step {
	return append(installed(from),
		step{do: "stage " + to},
		step{do: "activate 1"},
		step{do: "boot", boots: to, trial: true},
		step{do: "commit"},
	)
}

// contractCase is one story through the update contract, with each model's
// own expectations at each step.
type contractCase struct {
	name  string
	steps []step
}

// contractCases are TestBothModelsThroughTheUpdateContract's stories.
var contractCases = []contractCase{
	{
		name: "install: a fresh disk boots recovery until an image is staged and activated; never committed, it runs out of tries",
		steps: []step{
			{do: "boot", boots: "recovery", reason: map[Kind]string{AB: "no bootable slot", OSTree: "no deployment"}},
			{do: "stage os-1", images: "booted= staged=os-1 fallback="},
			// An installer (nothing runs from the disk) writes the
			// OSTree bootloader entry at once: a hard reset keeps it.
			{do: "activate 3"},
			{do: "hard-reset", boots: "os-1", trial: true},
			{do: "boot", boots: "os-1", trial: true},
			{do: "boot", boots: "os-1", trial: true, images: "booted=os-1 staged= fallback="},
			{do: "boot", boots: "recovery", reason: map[Kind]string{AB: "slot A (os-1) has no tries left", OSTree: "deployment 1 (os-1) has no tries left"}},
		},
	},
	{
		name: "install: committed on its first good boot",
		steps: []step{
			{do: "stage os-1"},
			{do: "activate 3"},
			{do: "boot", boots: "os-1", trial: true, images: "booted=os-1 staged= fallback="},
			{do: "commit"},
			{do: "boot", boots: "os-1"},
		},
	},
	{
		name: "update: the new image is tried, committed, and the old one stays as the fallback",
		steps: append(installed("os-1"),
			step{do: "stage os-2", images: "booted=os-1 staged=os-2 fallback="},
			step{do: "activate 2"},
			step{do: "boot", boots: "os-2", trial: true, images: "booted=os-2 staged= fallback=os-1"},
			step{do: "commit"},
			step{do: "boot", boots: "os-2", images: "booted=os-2 staged= fallback=os-1"},
		),
	},
	{
		name: "fallback: an image that never commits uses its tries, then the old committed one boots",
		steps: append(installed("os-1"),
			step{do: "stage os-bad"},
			step{do: "activate 2"},
			step{do: "boot", boots: "os-bad", trial: true},
			step{do: "boot", boots: "os-bad", trial: true},
			step{do: "boot", boots: "os-1", reason: map[Kind]string{AB: "slot B (os-bad) has no tries left", OSTree: "deployment 2 (os-bad) has no tries left"},
				// A/B: the failed image stays in its slot, written and
				// uncommitted; OSTree: greenboot's rollback made the
				// old deployment the default again.
				imagesKind: map[Kind]string{AB: "booted=os-1 staged=os-bad fallback=", OSTree: "booted=os-1 staged= fallback="}},
			step{do: "boot", boots: "os-1", reason: map[Kind]string{AB: "slot B (os-bad) has no tries left"}},
		),
	},
	{
		name: "a power cut while staging leaves the running image intact and nothing to activate",
		steps: append(installed("os-1"),
			step{do: "begin os-2", images: "booted=os-1 staged=os-2 fallback="},
			step{do: "powerloss", imagesKind: map[Kind]string{AB: "booted= staged= fallback=os-1", OSTree: "booted= staged= fallback="}},
			step{do: "activate 3", errKind: map[Kind]error{AB: ErrNotWritten, OSTree: ErrNoSuchRoot}},
			step{do: "boot", boots: "os-1", reason: map[Kind]string{AB: "slot B is corrupt"}},
		),
	},
	{
		name: "a staged image never activated: an A/B slot keeps it, OSTree drops it at the next power-off",
		steps: append(installed("os-1"),
			step{do: "stage os-2", images: "booted=os-1 staged=os-2 fallback="},
			step{do: "boot", boots: "os-1", imagesKind: map[Kind]string{AB: "booted=os-1 staged=os-2 fallback=", OSTree: "booted=os-1 staged= fallback="}},
		),
	},
	{
		name: "a hard reset after activation: OSTree never finalised the staged deployment and boots the old one, A/B boots the new slot",
		steps: append(installed("os-1"),
			step{do: "stage os-2"},
			step{do: "activate 1"},
			step{do: "hard-reset", bootsKind: map[Kind]string{AB: "os-2 trial", OSTree: "os-1"}, roots: map[Kind]string{AB: "os-1,os-2", OSTree: "os-1"}},
		),
	},
	{
		name: "a power cut while the shutdown finalises: OSTree loses the staged deployment, A/B has nothing to finalise",
		steps: append(installed("os-1"),
			step{do: "stage os-2"},
			step{do: "activate 1"},
			step{do: "cut-finalise"},
			// An A/B activation is one write of bootloader variables:
			// the new slot boots.
			step{do: "boot", roots: map[Kind]string{AB: "os-1,os-2", OSTree: "os-1"},
				bootsKind: map[Kind]string{AB: "os-2 trial", OSTree: "os-1"}},
		),
	},
	{
		name: "rollback: the committed fallback boots again and stays the default",
		steps: append(updated("os-1", "os-2"),
			step{do: "rollback"},
			step{do: "boot", boots: "os-1", images: "booted=os-1 staged= fallback=os-2"},
			step{do: "boot", boots: "os-1"},
		),
	},
	{
		name: "rollback needs a committed fallback",
		steps: append(installed("os-1"),
			step{do: "rollback", err: ErrNoFallback},
		),
	},
	{
		name: "recovery: no root can boot",
		steps: []step{
			{do: "stage os-bad"},
			{do: "activate 1"},
			{do: "boot", boots: "os-bad", trial: true},
			{do: "begin os-2"},
			{do: "powerloss"},
			{do: "boot", boots: "recovery", reason: map[Kind]string{AB: "slot A (os-bad) has no tries left; slot B is corrupt", OSTree: "deployment 1 (os-bad) has no tries left"}},
		},
	},
	{
		name: "reset: a requested recovery boot, then an erase leaves only the recovery partition",
		steps: append(updated("os-1", "os-2"),
			step{do: "recovery-once"},
			step{do: "boot", boots: "recovery", reason: both("a recovery boot was requested")},
			step{do: "erase", images: "booted= staged= fallback=", roots: both("")},
			step{do: "boot", boots: "recovery", reason: map[Kind]string{AB: "no bootable slot", OSTree: "no deployment"}},
			step{do: "stage os-3"},
			step{do: "activate 1"},
			step{do: "boot", boots: "os-3", trial: true},
		),
	},
	{
		name: "old images are pruned: two are kept",
		steps: append(updated("os-1", "os-2"),
			step{do: "stage os-3"},
			step{do: "activate 1"},
			step{do: "boot", boots: "os-3", trial: true, roots: both("os-2,os-3")},
		),
	},
	{
		name: "disk space: an image the root has no room for is refused before anything changes",
		steps: append(updated("os-1", "os-2"),
			step{do: "stage os-huge", err: ErrNoSpace, images: "booted=os-2 staged= fallback=os-1", roots: both("os-1,os-2")},
			step{do: "boot", boots: "os-2"},
		),
	},
	{
		name: "one writer: a second write while one is under way is refused, and may start once the first ends",
		steps: append(installed("os-1"),
			step{do: "begin os-2"},
			step{do: "stage os-3", err: ErrWriteUnderWay},
			step{do: "powerloss"},
			step{do: "stage os-3"},
		),
	},
	{
		name: "disk space: OSTree's deployments share one root, an A/B slot is its own",
		steps: append(installed("os-1"),
			step{do: "stage os-huge", errKind: map[Kind]error{AB: ErrNoSpace, OSTree: nil},
				imagesKind: map[Kind]string{AB: "booted=os-1 staged= fallback=", OSTree: "booted=os-1 staged=os-huge fallback="}},
		),
	},
	{
		name: "commit needs a booted root",
		steps: []step{
			{do: "commit", err: ErrNotBooted},
		},
	},
	{
		name: "/etc: OSTree carries the admin's edits into the new deployment; an A/B slot starts from its image's",
		steps: append(installed("os-1"),
			step{do: "edit /etc/marker=admin"},
			step{do: "edit /etc/upgradelab/release=pinned"},
			step{do: "edit /etc/os-release="},
			step{do: "stage os-2"},
			step{do: "activate 1"},
			step{do: "boot", boots: "os-2", trial: true, etc: map[Kind]map[string]string{
				AB:     {"/etc/marker": "", "/etc/upgradelab/release": "os-2\n", "/etc/os-release": "PRETTY_NAME=\"os-2\"\n"},
				OSTree: {"/etc/marker": "admin", "/etc/upgradelab/release": "pinned", "/etc/os-release": ""},
			}},
		),
	},
}

// TestBothModelsThroughTheUpdateContract drives the A/B and the OSTree
// model through the same cases with each model's own expectations.
func TestBothModelsThroughTheUpdateContract(t *testing.T) {
	tests := contractCases
	for _, kind := range Kinds {
		for _, tt := range tests {
			t.Run(string(kind)+"/"+tt.name, func(t *testing.T) {
				d, err := New(kind, "recovery-1", 0)
				if err != nil {
					t.Fatal(err)
				}
				d.RootMiB = rootMiB[kind]
				var last RootID
				for i, s := range tt.steps {
					runStep(t, d, kind, i, s, &last)
				}
			})
		}
	}
}

func runStep(t *testing.T, d *Disk, kind Kind, i int, s step, last *RootID) {
	t.Helper()
	got, err := doStep(t, d, kind, i, s, last)
	checkStep(t, d, kind, i, s, got, err)
}

// doStep does what step s says to the disk (last is the root the last
// stage began) and answers the boot it chose, if it booted.
func doStep(t *testing.T, d *Disk, kind Kind, i int, s step, last *RootID) (got BootDecision, err error) {
	t.Helper()
	verb, arg, _ := strings.Cut(s.do, " ")
	switch verb {
	case "stage", "begin":
		id, e := d.BeginStage(arg, "sha256:"+arg, sizeOf(arg))
		if err = e; err == nil {
			*last = id
			if verb == "stage" {
				err = d.FinishStage(*last)
			}
		}
	case "activate":
		var tries int
		fmt.Sscan(arg, &tries)
		err = d.Activate(*last, tries)
	case "boot":
		if _, ok := d.BeginFinalise(); ok {
			if err = d.FinishFinalise(); err != nil {
				break
			}
		}
		d.PowerLoss()
		got = d.SelectBoot()
	case "hard-reset":
		d.PowerLoss()
		got = d.SelectBoot()
	case "cut-finalise":
		_, ok := d.BeginFinalise()
		if ok != (kind == OSTree) {
			t.Fatalf("step %d: BeginFinalise = %v on a %s disk", i, ok, kind)
		}
		d.PowerLoss()
	case "commit":
		err = d.Commit()
	case "rollback":
		err = d.Rollback()
	case "powerloss":
		d.PowerLoss()
	case "recovery-once":
		d.RecoveryOnce = true
	case "erase":
		d.Erase()
	case "edit":
		path, value, _ := strings.Cut(arg, "=")
		err = d.WriteEtc(path, value)
	default:
		t.Fatalf("step %d: unknown step %q", i, s.do)
	}
	return got, err
}

// checkStep holds the disk after step s to what the step expects of
// kind: the error, the boot, the images and roots, /etc.
func checkStep(t *testing.T, d *Disk, kind Kind, i int, s step, got BootDecision, err error) {
	t.Helper()
	wantErr := s.err
	if e, ok := s.errKind[kind]; ok {
		wantErr = e
	}
	if !errors.Is(err, wantErr) {
		t.Fatalf("step %d (%s): error %v, want %v", i, s.do, err, wantErr)
	}
	if v, ok := s.bootsKind[kind]; ok {
		s.boots, s.trial = strings.TrimSuffix(v, " trial"), strings.HasSuffix(v, " trial")
	}
	if s.boots != "" {
		want := BootDecision{Source: FromRoot, Image: s.boots, Trial: s.trial, Reason: s.reason[kind]}
		if s.boots == "recovery" {
			want = BootDecision{Source: FromRecovery, Image: "recovery-1", Reason: s.reason[kind]}
		}
		got.Root = ""
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d (boot): got %+v, want %+v", i, got, want)
		}
	}
	wantImages := s.images
	if v, ok := s.imagesKind[kind]; ok {
		wantImages = v
	}
	if wantImages != "" {
		if g := summary(d.Images()); g != wantImages {
			t.Fatalf("step %d (%s): images %q, want %q", i, s.do, g, wantImages)
		}
	}
	if want, ok := s.roots[kind]; ok {
		var imgs []string
		for _, r := range d.Images().Roots {
			if r.Image != "" {
				imgs = append(imgs, r.Image)
			}
		}
		sort.Strings(imgs)
		if g := strings.Join(imgs, ","); g != want {
			t.Fatalf("step %d (%s): roots hold %q, want %q", i, s.do, g, want)
		}
	}
	for path, want := range s.etc[kind] {
		if g := d.Etc()[path]; g != want {
			t.Fatalf("step %d (%s): %s = %q, want %q (etc %v)", i, s.do, path, g, want, d.Etc())
		}
	}
}

func summary(im Images) string {
	name := func(r *Root) string {
		if r == nil {
			return ""
		}
		return r.Image
	}
	return fmt.Sprintf("booted=%s staged=%s fallback=%s", name(im.Booted), name(im.Staged), name(im.Fallback))
}

func TestPartitionsSurviveAnUpdateAndEraseWipesThem(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			d, _ := New(kind, "recovery-1", 0)
			var last RootID
			for i, s := range installed("os-1") {
				runStep(t, d, kind, i, s, &last)
			}
			d.Persistent["marker"] = "kept"
			d.OEM["bmc-user"] = "oem"
			for i, s := range []step{{do: "stage os-2"}, {do: "activate 1"}, {do: "boot", boots: "os-2", trial: true}} {
				runStep(t, d, kind, i, s, &last)
			}
			if d.Persistent["marker"] != "kept" || d.OEM["bmc-user"] != "oem" {
				t.Fatalf("an update lost data: persistent %v, oem %v", d.Persistent, d.OEM)
			}
			d.ConfigDrive = []byte("#cloud-config")
			d.Erase()
			if len(d.Persistent) != 0 || len(d.OEM) != 0 || d.ConfigDrive != nil || len(d.Images().Roots) != 0 && d.Images().Roots[0].State != Empty || d.Recovery != "recovery-1" {
				t.Fatalf("erase kept data: %+v", d)
			}
		})
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	for _, kind := range Kinds {
		d, _ := New(kind, "recovery-1", 3)
		id, _ := d.BeginStage("os-1", "abc", 1000)
		d.FinishStage(id)
		d.Persistent["k"] = "v"
		path := filepath.Join(t.TempDir(), "disk.json")
		if err := d.Save(path); err != nil {
			t.Fatal(err)
		}
		got, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, d) {
			t.Fatalf("%s: Load(Save(d)) = %+v, want %+v", kind, got, d)
		}
	}
}

func TestNewRefusesAnUnknownKindAndTooFewDeployments(t *testing.T) {
	if _, err := New("zfs", "r", 0); err == nil || !strings.Contains(err.Error(), `"zfs" is not one of [ab ostree]`) {
		t.Fatalf("New(zfs) = %v", err)
	}
	if _, err := New(OSTree, "r", 1); err == nil {
		t.Fatal("New(ostree, keep 1) succeeded")
	}
}

func TestMergeEtc(t *testing.T) {
	base := map[string]string{"/etc/a": "1", "/etc/b": "1", "/etc/c": "1"}
	current := map[string]string{"/etc/a": "1", "/etc/b": "admin", "/etc/new": "admin"} // c deleted
	next := map[string]string{"/etc/a": "2", "/etc/b": "2", "/etc/c": "2", "/etc/d": "2"}
	want := map[string]string{"/etc/a": "2", "/etc/b": "admin", "/etc/d": "2", "/etc/new": "admin"}
	if got := mergeEtc(base, current, next); !reflect.DeepEqual(got, want) {
		t.Fatalf("mergeEtc = %v, want %v", got, want)
	}
}
