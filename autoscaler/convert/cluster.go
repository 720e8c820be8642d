package convert

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// ScaledObjectResource is KEDA's ScaledObject resource.
var ScaledObjectResource = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}

// Selection says which objects of the cluster to read: names in
// Namespace, or every object of Namespace, or of every namespace.
type Selection struct {
	Namespace     string
	AllNamespaces bool
	Names         []string
}

func (s Selection) listNamespace() string {
	if s.AllNamespaces {
		return metav1.NamespaceAll
	}
	return s.Namespace
}

// ReadHPAs reads the selected HPAs as autoscaling/v2 (the API server
// converts autoscaling/v1 ones itself).
func ReadHPAs(ctx context.Context, kube kubernetes.Interface, sel Selection) ([]*autoscalingv2.HorizontalPodAutoscaler, error) {
	var out []*autoscalingv2.HorizontalPodAutoscaler
	if len(sel.Names) > 0 {
		for _, n := range sel.Names {
			h, err := kube.AutoscalingV2().HorizontalPodAutoscalers(sel.Namespace).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("reading HorizontalPodAutoscaler %s/%s: %w", sel.Namespace, n, err)
			}
			out = append(out, h)
		}
		return out, nil
	}
	list, err := kube.AutoscalingV2().HorizontalPodAutoscalers(sel.listNamespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing HorizontalPodAutoscalers: %w", err)
	}
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// PendingHandovers lists the MetricAutoscalers whose handover an earlier
// run began and did not finish (namespace/name), so that a run over a
// whole namespace finishes them too.
func PendingHandovers(ctx context.Context, dyn dynamic.Interface, sel Selection) ([][2]string, error) {
	list, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(sel.listNamespace()).List(ctx, metav1.ListOptions{LabelSelector: LabelHandover + "=" + handoverPending})
	if err != nil {
		return nil, fmt.Errorf("listing MetricAutoscalers: %w", err)
	}
	var out [][2]string
	for _, u := range list.Items {
		if len(sel.Names) == 0 || slices.Contains(sel.Names, u.GetName()) {
			out = append(out, [2]string{u.GetNamespace(), u.GetName()})
		}
	}
	return out, nil
}

// ReadScaledObjects reads the selected ScaledObjects.
func ReadScaledObjects(ctx context.Context, dyn dynamic.Interface, sel Selection) ([]Object, error) {
	var items []map[string]any
	if len(sel.Names) > 0 {
		for _, n := range sel.Names {
			u, err := dyn.Resource(ScaledObjectResource).Namespace(sel.Namespace).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("reading ScaledObject %s/%s: %w", sel.Namespace, n, err)
			}
			items = append(items, u.Object)
		}
	} else {
		list, err := dyn.Resource(ScaledObjectResource).Namespace(sel.listNamespace()).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing ScaledObjects: %w", err)
		}
		for _, u := range list.Items {
			items = append(items, u.Object)
		}
	}
	var out []Object
	for _, m := range items {
		data, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		o := Object{Where: "the cluster", APIVersion: "keda.sh/v1alpha1", Kind: "ScaledObject", JSON: data}
		out = append(out, o)
	}
	return out, nil
}
