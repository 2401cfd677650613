package monitor

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WatchedReader is what the Recorder's Management reads from: a cache of
// one namespace fed by one watch per kind, running until ctx ends.
// Listing six CAPI kinds from the API server ten times a second cost a
// quarter of a core per plane in the API server alone (CRDs are served
// through JSON); reading the same objects from a watch-fed cache costs
// nothing there, and a change reaches the cache within milliseconds, well
// inside the 100 ms poll. A kind is watched from its first List on.
// namespace "" is every namespace: the runs of a fleet share one such
// cache, one watch per kind for the plane instead of one per kind for
// each run (each reads its own namespace from it, by the cache's
// namespace index).
func WatchedReader(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, namespace string) (client.Reader, error) {
	o := cache.Options{Scheme: scheme}
	if namespace != "" {
		o.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	c, err := cache.New(cfg, o)
	if err != nil {
		return nil, fmt.Errorf("a cache of namespace %s: %w", namespace, err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the cache of namespace %s did not start: %w", namespace, ctx.Err())
	}
	return c, nil
}
