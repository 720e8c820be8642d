package main

import (
	"context"
	_ "unsafe" // go:linkname

	"k8s.io/kubernetes/pkg/controller/podautoscaler"
)

// The controller's own entry points, reached without changing upstream's
// package: what its HPA informer's add handler calls, and one pass of a
// worker over a key. Both have had these signatures since v1.2x; the
// linker's check of pulled symbols is turned off by run.sh.

//go:linkname enqueueHPA k8s.io/kubernetes/pkg/controller/podautoscaler.(*HorizontalController).enqueueHPA
func enqueueHPA(a *podautoscaler.HorizontalController, obj interface{})

//go:linkname reconcileKey k8s.io/kubernetes/pkg/controller/podautoscaler.(*HorizontalController).reconcileKey
func reconcileKey(a *podautoscaler.HorizontalController, ctx context.Context, key string) (bool, error)
