package mgmt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// The end of kube-apiserver v1.36.3's log when it died during an e2e run
// (CRDs created in parallel), after an older crash and etcd's lines.
const crashedLog = `panic: an older crash
goroutine 1 [running]:
main.old()
{"level":"info","msg":"etcd line"}
I1203 17:30:15.700000  1 handler.go:288] Adding GroupVersion cluster.x-k8s.io v1beta2 to ResourceManager
panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x1647631]

goroutine 9151 [running]:
k8s.io/kube-openapi/pkg/cached.(*Atomic[...]).Get(0x740?)
	k8s.io/kube-openapi@v0.0.0-20260317180543-43fb72c5454a/pkg/cached/cache.go:264 +0x11
k8s.io/kube-openapi/pkg/cached.(*LastSuccess[...]).Get(0x68b32e0)
	k8s.io/kube-openapi@v0.0.0-20260317180543-43fb72c5454a/pkg/cached/cache.go:277 +0x2a
{"level":"info","msg":"received signal; shutting down","signal":"terminated"}
`

func TestCrashReasonIsTheRuntimesLastWord(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	panicked := write("panic.log", crashedLog)
	aborted := write("abort.log", "I1203 started\nSIGABRT: abort\nPC=0x47e1e1 m=0 sigcode=0\n\ngoroutine 0 gp=0x5 m=0 mp=0x6 [idle]:\nruntime.futex(0x1, 0x80)\n\truntime/sys_linux_amd64.s:557 +0x21\n")
	killed := write("killed.log", "I1203 serving\nE1203 SIGTERM-free lines: nothing fatal here\n")
	older := strings.Index(crashedLog, "{\"level\"")
	for _, c := range []struct {
		path string
		from int64
		want string
	}{
		{panicked, 0, "panic: runtime error: invalid memory address or nil pointer dereference in k8s.io/kube-openapi/pkg/cached.(*Atomic[...]).Get"},
		// Only what the process wrote: an older crash before its start
		// is not its reason.
		{write("old-only.log", crashedLog[:older]), int64(older), "exited"},
		{aborted, 0, "SIGABRT: abort in runtime.futex"},
		{killed, 0, "exited"},
		{filepath.Join(dir, "missing.log"), 0, "exited"},
	} {
		if got := crashReason(c.path, c.from); got != c.want {
			t.Errorf("crashReason(%s, %d) = %q, want %q", filepath.Base(c.path), c.from, got, c.want)
		}
	}
}

func TestCrashBackoffIsTheKubelets(t *testing.T) {
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		if got := crashBackoff(i + 1); got != w {
			t.Errorf("crash %d: back-off %s, want %s", i+1, got, w)
		}
	}
}

// The back-off grows only with crashes in a row: one 10 quiet minutes
// after the last starts again from an immediate restart.
func TestBackOffCountForgetsAfterTenQuietMinutes(t *testing.T) {
	now := time.Now()
	at := func(ago time.Duration) APIServerCrash { return APIServerCrash{Time: now.Add(-ago)} }
	for _, c := range []struct {
		earlier []APIServerCrash
		want    int
	}{
		{nil, 1},
		{[]APIServerCrash{at(time.Minute)}, 2},
		{[]APIServerCrash{at(25 * time.Minute), at(17 * time.Minute), at(9 * time.Minute)}, 4},
		{[]APIServerCrash{at(30 * time.Minute), at(20 * time.Minute), at(11 * time.Minute)}, 1},
		{[]APIServerCrash{at(30 * time.Minute), at(2 * time.Minute), at(time.Minute)}, 3},
	} {
		if got := backOffCount(c.earlier, now); got != c.want {
			t.Errorf("crashes %v ago: count %d, want %d", c.earlier, got, c.want)
		}
	}
}

// An API server that answers "connection refused" or drops the
// connection (restarting) delays an install; an invalid object fails it
// at once.
func TestCreateOrReplaceRidesThroughAnAPIServerRestart(t *testing.T) {
	down := errors.New(`Post "https://127.0.0.1:20001/api/v1/namespaces": dial tcp 127.0.0.1:20001: connect: connection refused`)
	var calls int
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			calls++
			if calls <= 3 {
				return down
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "capi-system"}}
	if err := createOrReplace(ctx, c, ns); err != nil {
		t.Fatalf("after three refused connections: %v", err)
	}
	if calls != 4 {
		t.Errorf("%d creates, want 4", calls)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}); err != nil {
		t.Fatal(err)
	}

	calls = 0
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Namespace"}, "Bad_Name", field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), "Bad_Name", "a lowercase RFC 1123 label")})
	c = fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			calls++
			return invalid
		},
	}).Build()
	start := time.Now()
	err := createOrReplace(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"}})
	if !apierrors.IsInvalid(err) || calls != 1 || time.Since(start) > time.Second {
		t.Errorf("an invalid object: %v after %d tries in %s; want the API server's answer at once", err, calls, time.Since(start))
	}
}
