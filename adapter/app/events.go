package app

import (
	"context"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Downward API variables naming the adapter's pod (manifests/adapter/deployment.yaml).
const (
	envPodName      = "POD_NAME"
	envPodNamespace = "POD_NAMESPACE"
	envPodUID       = "POD_UID"
)

// podEvents returns a function emitting events on the adapter's own pod,
// named by POD_NAME and POD_NAMESPACE (and POD_UID, without which
// "kubectl describe pod" does not list them), and a function that stops
// the broadcaster. Without the pod's name it returns nil: the events are
// skipped and only the logs and metrics tell.
func podEvents(ctx context.Context, cfg *rest.Config) (eventFunc, func()) {
	name, ns := os.Getenv(envPodName), os.Getenv(envPodNamespace)
	if name == "" || ns == "" {
		klog.V(2).InfoS("Not emitting events: the pod is unknown (set POD_NAME and POD_NAMESPACE from the downward API)")
		return nil, func() {}
	}
	client, err := typedcorev1.NewForConfig(cfg)
	if err != nil {
		klog.ErrorS(err, "Not emitting events: building the client failed")
		return nil, func() {}
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.Events(ns)})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "metricscale-adapter"})
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: name, UID: types.UID(os.Getenv(envPodUID))}
	klog.InfoS("Emitting config reload events on the adapter's pod", "pod", klog.KRef(ns, name))
	return func(eventtype, reason, message string) {
		rec.Event(ref, eventtype, reason, message)
	}, b.Shutdown
}
