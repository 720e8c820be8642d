package resourcemetrics

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/metrics/pkg/apis/metrics"
)

// columns are those of kubectl get podmetrics/nodemetrics with
// metrics-server: the pod's usage is the sum of its containers'.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the pod or node"},
	{Name: "CPU", Type: "string", Format: "quantity", Description: "CPU usage, in cores"},
	{Name: "Memory", Type: "string", Format: "quantity", Description: "Memory working set, in bytes"},
	{Name: "Window", Type: "string", Format: "duration", Description: "Interval the usage was measured over"},
}

func row(name string, usage corev1.ResourceList, window metav1.Duration, obj runtime.Object) metav1.TableRow {
	cpu, mem := usage[corev1.ResourceCPU], usage[corev1.ResourceMemory]
	return metav1.TableRow{
		Cells:  []any{name, cpu.String(), mem.String(), window.Duration.String()},
		Object: runtime.RawExtension{Object: obj},
	}
}

func podRow(pm *metrics.PodMetrics) metav1.TableRow {
	var cpu, mem resource.Quantity
	for _, c := range pm.Containers {
		cpu.Add(c.Usage[corev1.ResourceCPU])
		mem.Add(c.Usage[corev1.ResourceMemory])
	}
	return row(pm.Name, corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}, pm.Window, pm)
}

// ConvertToTable implements rest.TableConvertor.
func (s *podStorage) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{ColumnDefinitions: columns}
	switch o := obj.(type) {
	case *metrics.PodMetrics:
		t.ResourceVersion = o.ResourceVersion
		t.Rows = []metav1.TableRow{podRow(o)}
	case *metrics.PodMetricsList:
		t.ResourceVersion = o.ResourceVersion
		t.Continue = o.Continue
		for i := range o.Items {
			t.Rows = append(t.Rows, podRow(&o.Items[i]))
		}
	default:
		return nil, fmt.Errorf("converting %T to a table: not PodMetrics", obj)
	}
	return t, nil
}

// ConvertToTable implements rest.TableConvertor.
func (s *nodeStorage) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{ColumnDefinitions: columns}
	switch o := obj.(type) {
	case *metrics.NodeMetrics:
		t.ResourceVersion = o.ResourceVersion
		t.Rows = []metav1.TableRow{row(o.Name, o.Usage, o.Window, o)}
	case *metrics.NodeMetricsList:
		t.ResourceVersion = o.ResourceVersion
		t.Continue = o.Continue
		for i := range o.Items {
			t.Rows = append(t.Rows, row(o.Items[i].Name, o.Items[i].Usage, o.Items[i].Window, &o.Items[i]))
		}
	default:
		return nil, fmt.Errorf("converting %T to a table: not NodeMetrics", obj)
	}
	return t, nil
}
