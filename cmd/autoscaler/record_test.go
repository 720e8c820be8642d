package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
	"github.com/metricscale/metricscale/autoscaler/record"
	"github.com/metricscale/metricscale/autoscaler/recordserver"
	"github.com/metricscale/metricscale/autoscaler/scenario"
)

type depths struct{ v []int64 }

func (depths) ResourceMetric(context.Context, corev1.ResourceName, string, labels.Selector, string) (metricsource.PodMetricsInfo, time.Time, error) {
	return nil, time.Time{}, errors.New("none")
}
func (depths) PodsMetric(context.Context, string, string, labels.Selector, labels.Selector) (metricsource.PodMetricsInfo, time.Time, error) {
	return nil, time.Time{}, errors.New("none")
}
func (depths) ObjectMetric(context.Context, string, string, *autoscalingv2.CrossVersionObjectReference, labels.Selector) (int64, time.Time, error) {
	return 0, time.Time{}, errors.New("none")
}
func (d *depths) ExternalMetric(context.Context, string, string, labels.Selector) ([]int64, time.Time, error) {
	return d.v, time.Time{}, nil
}

type none struct{}

func (none) List(labels.Selector) ([]*corev1.Pod, error) { return nil, nil }

// TestRecordCommand fetches a recording from a record endpoint over TLS
// with the kubeconfig's token, writes the scenario and the decisions, and
// checks the replay; errors of the endpoint end in exit 1 with its message.
func TestRecordCommand(t *testing.T) {
	t.Parallel()
	rec := record.New(record.Options{MaxSteps: 100})
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	avg := resource.MustParse("10")
	ma := &v1alpha1.MetricAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "shop", UID: "u"},
		Spec: v1alpha1.MetricAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "workers"},
			MaxReplicas: 20, Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "q"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg}}}}}}
	src := &depths{}
	replicas := int32(1)
	var history decision.Input
	for i, d := range []int64{50, 120, 120, 10, 10} {
		src.v = []int64{d * 1000}
		rc := rec.Begin(ma)
		in := decision.Input{Autoscaler: ma.HPA(), Scale: decision.Scale{Replicas: replicas, StatusReplicas: replicas, Selector: "app=w"},
			Pods: none{}, Metrics: src, History: history.History, Settings: decision.DefaultSettings(), Now: t0.Add(time.Duration(i) * 10 * time.Minute)}
		rc.Input(&in)
		res := decision.Decide(context.Background(), in).Finish(nil)
		replicas, history.History = res.Replicas, res.History
		written := v1alpha1.MetricAutoscalerStatus{CurrentReplicas: res.Status.CurrentReplicas, DesiredReplicas: res.Status.DesiredReplicas,
			Conditions: res.Status.Conditions, LastScaleTime: res.Status.LastScaleTime}
		rc.Done(res, &written)
		// What the API server stores, the next reconcile reads.
		data, err := json.Marshal(written)
		if err != nil {
			t.Fatal(err)
		}
		ma.Status = v1alpha1.MetricAutoscalerStatus{}
		if err := json.Unmarshal(data, &ma.Status); err != nil {
			t.Fatal(err)
		}
	}
	h := &recordserver.Handler{
		Authenticator: authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
			if r.Header.Get("Authorization") != "Bearer sre-token" {
				return nil, false, nil
			}
			return &authenticator.Response{User: &user.DefaultInfo{Name: "sre"}}, true, nil
		}),
		Authorizer: authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
			return authorizer.DecisionAllow, "", nil
		}),
		Recorder: rec, Now: func() time.Time { return t0.Add(time.Hour) },
	}
	srv := httptest.NewTLSServer(h)
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := func(token string) string {
		p := filepath.Join(dir, token+".kubeconfig")
		data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: shop}}]
current-context: x
`, token)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	out, decisions := filepath.Join(dir, "workers.yaml"), filepath.Join(dir, "workers.jsonl")
	var stdout, stderr bytes.Buffer
	code := recordCommand(context.Background(), []string{"workers", "--kubeconfig", kubeconfig("sre-token"), "--server", srv.URL,
		"--certificate-authority", ca, "-o", out, "--decisions", decisions}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "5 reconciles of shop/workers") || !strings.Contains(stderr.String(), "the replay makes every recorded decision") {
		t.Errorf("stderr %q", stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scenario.Parse(data); err != nil {
		t.Errorf("the written scenario does not parse: %v", err)
	}
	lines, err := os.ReadFile(decisions)
	if err != nil || strings.Count(string(lines), "\n") != 5 {
		t.Errorf("decisions file: %v\n%s", err, lines)
	}

	// Without credentials the endpoint's 401 is reported.
	stderr.Reset()
	code = recordCommand(context.Background(), []string{"workers", "--kubeconfig", kubeconfig("wrong"), "--server", srv.URL, "--certificate-authority", ca}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "HTTP 401") {
		t.Errorf("without a valid token: exit %d, %q", code, stderr.String())
	}
	// Bad usage.
	if code := recordCommand(context.Background(), nil, &stdout, &stderr); code != 2 {
		t.Errorf("no name: exit %d, want 2", code)
	}
}
