package boot

import (
	"context"
	"sync"
	"testing"
)

// Two labs starting at once on a cold cache both fetched the kernel into
// one temporary folder and one of them failed its rename ("no such file
// or directory", the first make e2e-vm on a fresh machine).
func TestKernelFetchesAtOnceOnAColdCacheAllSucceed(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	kernels := make([]*Kernel, 3)
	errs := make([]error, 3)
	for i := range kernels {
		wg.Go(func() { kernels[i], errs[i] = FetchKernel(context.Background(), dir, KernelMeta) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("fetch %d: %v", i, err)
		}
		if kernels[i].Image != kernels[0].Image {
			t.Fatalf("fetch %d found %s, fetch 0 %s", i, kernels[i].Image, kernels[0].Image)
		}
	}
}
