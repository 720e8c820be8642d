package convert_test

import (
	"strings"
	"testing"

	"github.com/metricscale/metricscale/autoscaler/convert"
)

func TestReadObjects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    []string // Describe() of each object
		wantErr string
	}{
		{name: "a JSON stream", in: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"a","namespace":"x"}}
{"apiVersion":"keda.sh/v1alpha1","kind":"ScaledObject","metadata":{"name":"b"}}`,
			want: []string{"HorizontalPodAutoscaler x/a", "ScaledObject b"}},
		{name: "YAML documents, empty ones skipped, a typed list", in: "---\n---\napiVersion: keda.sh/v1alpha1\nkind: ScaledObjectList\nitems:\n- metadata: {name: c, namespace: ns-y}\n",
			want: []string{"ScaledObject ns-y/c"}},
		{name: "the document of an error", in: "apiVersion: v1\nkind: List\nitems: []\n---\nkind: HorizontalPodAutoscaler\nmetadata: {name: d}\n",
			wantErr: "in.yaml: document 2: apiVersion: required"},
		{name: "the list item of an error", in: "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: autoscaling/v2}\n",
			wantErr: "in.yaml: document 1: items[0]: kind: required"},
		{name: "not YAML", in: "a: [1,\n", wantErr: "in.yaml: document 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			objs, err := convert.ReadObjects("in.yaml", []byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.Describe())
			}
			if strings.Join(got, ";") != strings.Join(tt.want, ";") {
				t.Errorf("objects %q, want %q", got, tt.want)
			}
		})
	}
}
