package app_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/adapter/internal/testenv"
	"github.com/metricscale/metricscale/hack/freeport"
)

// chartDir holds renders of prometheus-community's prometheus-adapter chart
// (see the files' headers).
const chartDir = "../dropin/testdata/prometheus-community-chart"

// chartRender returns the adapter container's arguments of the Deployment in
// file and the config.yaml of render.yaml's ConfigMap.
func chartRender(t *testing.T, file string) (args []string, config string) {
	t.Helper()
	for _, f := range []string{file, "render.yaml"} {
		data, err := os.ReadFile(filepath.Join(chartDir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			var meta struct{ Kind string }
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			switch {
			case meta.Kind == "Deployment" && f == file:
				var d appsv1.Deployment
				if err := yaml.UnmarshalStrict(doc, &d); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				args = d.Spec.Template.Spec.Containers[0].Args
			case meta.Kind == "ConfigMap" && f == "render.yaml":
				var cm corev1.ConfigMap
				if err := yaml.UnmarshalStrict(doc, &cm); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				config = cm.Data["config.yaml"]
			}
		}
	}
	if len(args) == 0 || config == "" {
		t.Fatalf("%s: no Deployment arguments or no config.yaml", file)
	}
	return args, config
}

// The arguments prometheus-community's prometheus-adapter chart renders
// start the adapter as they are (the leading "/adapter" included) and serve
// the rules of the ConfigMap it renders: an external rule's metric and the
// custom rule's name in discovery. Only what the pod's environment provides
// is the test's: its files (the ConfigMap mounted at /etc/adapter/, the
// emptyDir at /tmp, the serving Secret), its port and the cluster's DNS name
// of Prometheus.
func TestPrometheusCommunityChartArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		render string
		edit   func([]string) []string
	}{
		{name: "chart 5.3.0", render: "render.yaml"},
		{name: "chart 5.3.0, certManager", render: "render-certmanager.yaml"},
		{
			// Older versions of the chart's template put --logtostderr=true
			// after --cert-dir.
			name: "older chart with --logtostderr", render: "render.yaml",
			edit: func(args []string) []string {
				i := slices.Index(args, "--cert-dir=/tmp/cert")
				return slices.Insert(slices.Clone(args), i+1, "--logtostderr=true")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args, config := chartRender(t, tc.render)
			if tc.edit != nil {
				args = tc.edit(args)
			}
			if args[0] != "/adapter" {
				t.Fatalf("the render's first argument is %q, want /adapter", args[0])
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			prom := &fakeProm{series: `[{"__name__":"rabbitmq_queue_messages_ready","queue":"orders"},` +
				`{"__name__":"http_requests_total","namespace":"default","pod":"web-1"}]`}
			srv := httptest.NewServer(prom)
			defer srv.Close()

			dir := t.TempDir()
			etc := filepath.Join(dir, "etc-adapter")
			if err := os.MkdirAll(etc, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(etc, "config.yaml"), []byte(config), 0o600); err != nil {
				t.Fatal(err)
			}
			port, err := freeport.Get()
			if err != nil {
				t.Fatal(err)
			}
			serving := filepath.Join(dir, "serving") // testenv's serving certificate, CA-signed
			pod := strings.NewReplacer(
				"/etc/adapter/", etc+"/",
				"/tmp/cert", serving,
				"/var/run/serving-cert/tls.crt", filepath.Join(serving, "apiserver.crt"),
				"/var/run/serving-cert/tls.key", filepath.Join(serving, "apiserver.key"),
				"--secure-port=6443", "--secure-port="+strconv.Itoa(port),
				"http://prometheus-operated.monitoring.svc:9090", srv.URL,
			)
			var run []string
			for _, a := range args {
				run = append(run, pod.Replace(a))
			}
			a, err := testenv.Start(ctx, dir, run...)
			if err != nil {
				t.Fatalf("adapter %v: %v", args, err)
			}
			defer a.Stop()
			for _, verb := range []string{"get", "list"} {
				a.Fake.Allow(testenv.HPAUser, verb, "metrics.k8s.io", "*")
			}
			hpa := a.NewClient(a.SecurePort, testenv.HPAToken, nil)

			// The external rule: rabbitmq_queue_messages_ready as rabbitmq_queue_messages_ready.
			path := "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/rabbitmq_queue_messages_ready?labelSelector=queue%3Dorders"
			list, body := externalAfterRelist(ctx, t, hpa, path)
			var code int
			if len(list.Items) != 1 || list.Items[0].Value.Value() != 42 {
				t.Errorf("answer = %s, want one item of value 42", body)
			}
			prom.mu.Lock()
			sent := strings.Join(prom.queries, "\n")
			prom.mu.Unlock()
			if want := `sum(rabbitmq_queue_messages_ready{queue="orders"}) by (queue)`; !strings.Contains(sent, want) {
				t.Errorf("PromQL sent:\n%s\nwant %s", sent, want)
			}

			// The custom rule's name (http_requests_total as
			// http_requests_per_second) and the resourceRules' API group.
			code, body, err = hpa.Get(ctx, "/apis/custom.metrics.k8s.io/v1beta2")
			if err != nil || code != 200 || !strings.Contains(string(body), `"pods/http_requests_per_second"`) {
				t.Errorf("custom metrics discovery: %d %v %s, want pods/http_requests_per_second", code, err, body)
			}
			code, body, err = hpa.Get(ctx, "/apis/metrics.k8s.io/v1beta1")
			if err != nil || code != 200 || !strings.Contains(string(body), `"pods"`) {
				t.Errorf("metrics.k8s.io discovery: %d %v %s, want pods (resourceRules)", code, err, body)
			}
		})
	}
}
