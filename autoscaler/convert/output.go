package convert

import (
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// WriteMetricAutoscalers writes mas as YAML documents for kubectl apply:
// metadata and spec, no status. comments go first, one "# " line each.
func WriteMetricAutoscalers(w io.Writer, comments []string, mas []*v1alpha1.MetricAutoscaler) error {
	var b strings.Builder
	writeComments(&b, comments)
	for i, ma := range mas {
		u, err := toUnstructured(ma)
		if err != nil {
			return err
		}
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if len(ma.Annotations) == 0 {
			unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
		}
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			return fmt.Errorf("encoding MetricAutoscaler %s/%s: %w", ma.Namespace, ma.Name, err)
		}
		if i > 0 || len(comments) > 0 {
			b.WriteString("---\n")
		}
		b.Write(data)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteAdapterConfig writes an adapter config (from MergeAdapterConfig)
// with comments first.
func WriteAdapterConfig(w io.Writer, comments []string, config []byte) error {
	var b strings.Builder
	writeComments(&b, comments)
	b.Write(config)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeComments(b *strings.Builder, comments []string) {
	for _, c := range comments {
		for _, line := range strings.Split(c, "\n") {
			b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
		}
	}
}
