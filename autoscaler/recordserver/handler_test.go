package recordserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
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
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// tokens authenticates "Bearer NAME" as user NAME, "Bearer anonymous" as
// system:anonymous, and nothing else.
var tokens = authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
	name, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	switch {
	case !ok:
		return nil, false, nil
	case name == "anonymous":
		return &authenticator.Response{User: &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}}, true, nil
	case name == "broken":
		return nil, false, errors.New("token review failed")
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: name}}, true, nil
})

// rbac allows user "sre" what its rules say, and records what was asked.
type rbac struct{ asked []authorizer.Attributes }

func (r *rbac) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	r.asked = append(r.asked, a)
	if a.GetUser().GetName() == "sre" && a.GetVerb() == "get" && a.GetAPIGroup() == "autoscaling.metricscale.dev" &&
		a.GetResource() == "metricautoscalers" && a.GetSubresource() == "record" && a.GetNamespace() == "shop" {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no RBAC rule allows it", nil
}

type queue struct{}

func (queue) ResourceMetric(context.Context, corev1.ResourceName, string, labels.Selector, string) (metricsource.PodMetricsInfo, time.Time, error) {
	return nil, time.Time{}, errors.New("none")
}
func (queue) PodsMetric(context.Context, string, string, labels.Selector, labels.Selector) (metricsource.PodMetricsInfo, time.Time, error) {
	return nil, time.Time{}, errors.New("none")
}
func (queue) ObjectMetric(context.Context, string, string, *autoscalingv2.CrossVersionObjectReference, labels.Selector) (int64, time.Time, error) {
	return 0, time.Time{}, errors.New("none")
}
func (queue) ExternalMetric(context.Context, string, string, labels.Selector) ([]int64, time.Time, error) {
	return []int64{90000}, t0, nil
}

type noPods struct{}

func (noPods) List(labels.Selector) ([]*corev1.Pod, error) { return nil, nil }

// recorded returns a recorder holding three reconciles of shop/workers,
// a minute apart.
func recorded(t *testing.T) *record.Recorder {
	r := record.New(record.DefaultOptions())
	avg := resource.MustParse("30")
	ma := &v1alpha1.MetricAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "shop", UID: "u"},
		Spec: v1alpha1.MetricAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "workers"},
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "q"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg}}}},
		},
	}
	replicas := int32(1)
	for i := range 3 {
		rc := r.Begin(ma)
		in := decision.Input{Autoscaler: ma.HPA(), Scale: decision.Scale{Replicas: replicas, StatusReplicas: replicas, Selector: "app=w"},
			Pods: noPods{}, Metrics: queue{}, Settings: decision.DefaultSettings(), Now: t0.Add(time.Duration(i) * time.Minute)}
		rc.Input(&in)
		res := decision.Decide(context.Background(), in).Finish(nil)
		replicas = res.Replicas
		written := v1alpha1.MetricAutoscalerStatus{CurrentReplicas: res.Status.CurrentReplicas, DesiredReplicas: res.Status.DesiredReplicas, Conditions: res.Status.Conditions}
		rc.Done(res, &written)
	}
	return r
}

func TestHandler(t *testing.T) {
	t.Parallel()
	rec := recorded(t)
	leading := true
	cases := []struct {
		name, path, method, token string
		notLeading                bool
		wantCode                  int
		wantIn                    string
		wantSteps                 int
	}{
		{name: "no credentials", path: Path("shop", "workers"), wantCode: 401, wantIn: "authentication required"},
		{name: "anonymous", path: Path("shop", "workers"), token: "anonymous", wantCode: 401},
		{name: "token review failing", path: Path("shop", "workers"), token: "broken", wantCode: 401},
		{name: "anonymous on another path", path: "/healthz", token: "anonymous", wantCode: 401},
		{name: "other path", path: "/apis/autoscaling.metricscale.dev/v1alpha1/namespaces/shop/metricautoscalers/workers", token: "sre", wantCode: 404},
		{name: "path escaping", path: "/apis/autoscaling.metricscale.dev/v1alpha1/namespaces/../metricautoscalers/workers/record", token: "sre", wantCode: 404},
		{name: "forbidden", path: Path("shop", "workers"), token: "dev", wantCode: 403,
			wantIn: `User \"dev\" cannot get resource \"metricautoscalers/record\" in API group \"autoscaling.metricscale.dev\" in the namespace \"shop\"`},
		{name: "forbidden elsewhere", path: Path("billing", "workers"), token: "sre", wantCode: 403},
		{name: "not a GET", path: Path("shop", "workers"), method: http.MethodPost, token: "sre", wantCode: 405},
		{name: "not the leader", path: Path("shop", "workers"), token: "sre", notLeading: true, wantCode: 503, wantIn: `the leader is \"other_1\"`},
		{name: "unknown object", path: Path("shop", "nightly"), token: "sre", wantCode: 404, wantIn: `metricautoscalers.autoscaling.metricscale.dev \"nightly\" not found in namespace \"shop\"`},
		{name: "bad last", path: Path("shop", "workers") + "?last=soon", token: "sre", wantCode: 400, wantIn: "last:"},
		{name: "all", path: Path("shop", "workers"), token: "sre", wantCode: 200, wantSteps: 3},
		// "Now" is 2m30s after the first step: the last 1m has one step.
		{name: "last minute", path: Path("shop", "workers") + "?last=1m", token: "sre", wantCode: 200, wantSteps: 1},
		{name: "nothing that recent", path: Path("shop", "workers") + "?last=10s", token: "sre", wantCode: 404, wantIn: "since"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			authz := &rbac{}
			h := &Handler{Authenticator: tokens, Authorizer: authorizer.AuthorizerFunc(authz.Authorize), Recorder: rec, Identity: "this_1",
				Leader: func() (bool, string) {
					if tc.notLeading {
						return false, "other_1"
					}
					return leading, "this_1"
				},
				Now: func() time.Time { return t0.Add(150 * time.Second) }}
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			req := httptest.NewRequest(method, tc.path, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			body := w.Body.String()
			if w.Code != tc.wantCode {
				t.Fatalf("code %d, want %d: %s", w.Code, tc.wantCode, body)
			}
			if !strings.Contains(body, tc.wantIn) {
				t.Errorf("body %s, want it to contain %s", body, tc.wantIn)
			}
			if tc.notLeading && w.Header().Get(LeaderHeader) != "other_1" {
				t.Errorf("leader header %q", w.Header().Get(LeaderHeader))
			}
			if tc.wantCode == 401 && len(authz.asked) > 0 {
				t.Errorf("an unauthenticated request reached authorization")
			}
			if tc.wantCode != 200 {
				var st metav1.Status
				if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || st.Kind != "Status" || int(st.Code) != tc.wantCode {
					t.Errorf("not a Status of code %d: %s", tc.wantCode, body)
				}
				return
			}
			var got record.Recording
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Recorded) != tc.wantSteps || len(got.Scenario.Steps) != tc.wantSteps {
				t.Errorf("%d steps, want %d", len(got.Recorded), tc.wantSteps)
			}
			if a := authz.asked; len(a) != 1 || a[0].GetName() != "workers" || !a[0].IsResourceRequest() {
				t.Errorf("authorized %v, want one resource request for workers", a)
			}
		})
	}
}
