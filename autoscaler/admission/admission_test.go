package admission

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/metricscale/metricscale/autoscaler/validation"
)

// object is a MetricAutoscaler as kube-apiserver sends it, with the given
// formula expression and schedule start (cron) and time zone.
func object(expr, cron, zone string) string {
	return fmt.Sprintf(`{
  "apiVersion": "autoscaling.metricscale.dev/v1alpha1", "kind": "MetricAutoscaler",
  "metadata": {"name": "orders", "namespace": "shop", "uid": "5f0c"},
  "spec": {
    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
    "minReplicas": 1, "maxReplicas": 10,
    "metrics": [
      {"type": "External", "external": {"metric": {"name": "orders"}, "target": {"type": "AverageValue", "averageValue": "5"}}},
      {"type": "External", "external": {"metric": {"name": "payments"}, "target": {"type": "AverageValue", "averageValue": "5"}}}
    ],
    "formula": {"name": "backlog", "inputs": [{"name": "orders", "metric": 0}, {"name": "payments", "metric": 1}],
      "expression": %q, "target": {"type": "AverageValue", "averageValue": "10"}},
    "schedules": [{"name": "business-hours", "start": %q, "duration": "9h", "timeZone": %q, "minReplicas": 3}]
  }
}`, expr, cron, zone)
}

const (
	goodExpr = "orders + 2 * payments"
	goodCron = "0 8 * * 1-5"
	goodZone = "Europe/Paris"
)

// heavy is a formula whose estimated cost exceeds formula.MaxCost: three
// nested comprehensions over 30-element lists.
var heavy = func() string {
	list := "[" + strings.Repeat("orders,", 29) + "orders]"
	return "double(" + list + ".map(x, " + list + ".map(y, " + list + ".map(z, x * y * z).size()).size()).size())"
}()

func review(op, kind, obj, old string) string {
	if old == "" {
		old = "null"
	}
	return fmt.Sprintf(`{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
  "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
  "kind": {"group": "autoscaling.metricscale.dev", "version": "v1alpha1", "kind": %q},
  "resource": {"group": "autoscaling.metricscale.dev", "version": "v1alpha1", "resource": "metricautoscalers"},
  "name": "orders", "namespace": "shop", "operation": %q,
  "userInfo": {"username": "admin"},
  "object": %s, "oldObject": %s, "dryRun": false}}`, kind, op, obj, old)
}

func post(t *testing.T, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	(&Handler{Options: validation.Options{ScaleToZero: true}}).ServeHTTP(w, r)
	return w
}

// TestReview drives the handler with AdmissionReviews as kube-apiserver
// sends them and reads its answers.
func TestReview(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		body    string
		allowed bool
		code    int32
		// says are substrings of the denial's message, each an error as
		// "field: what is wrong".
		says []string
	}{
		{name: "valid create", body: review("CREATE", "MetricAutoscaler", object(goodExpr, goodCron, goodZone), ""), allowed: true},
		{name: "valid update", body: review("UPDATE", "MetricAutoscaler", object(goodExpr, goodCron, goodZone), object("orders", goodCron, goodZone)), allowed: true},
		{name: "expression does not compile", body: review("CREATE", "MetricAutoscaler", object("orders +* payments", goodCron, goodZone), ""),
			code: 422, says: []string{`MetricAutoscaler "orders" is invalid: spec.formula.expression: `}},
		{name: "unknown variable", body: review("CREATE", "MetricAutoscaler", object("orders + refunds", goodCron, goodZone), ""),
			code: 422, says: []string{"spec.formula.expression: ", "refunds"}},
		{name: "not a number", body: review("CREATE", "MetricAutoscaler", object("'a'", goodCron, goodZone), ""),
			code: 422, says: []string{"spec.formula.expression: ", "string"}},
		{name: "too costly", body: review("CREATE", "MetricAutoscaler", object(heavy, goodCron, goodZone), ""),
			code: 422, says: []string{"spec.formula.expression: ", "exceeds the limit"}},
		{name: "bad cron", body: review("CREATE", "MetricAutoscaler", object(goodExpr, "0 25 * * *", goodZone), ""),
			code: 422, says: []string{"spec.schedules[0].start: "}},
		{name: "unknown time zone", body: review("CREATE", "MetricAutoscaler", object(goodExpr, goodCron, "Mars/Olympus"), ""),
			code: 422, says: []string{"spec.schedules[0].timeZone: "}},
		{name: "two errors listed", body: review("CREATE", "MetricAutoscaler", object("orders +", "every day", goodZone), ""),
			code: 422, says: []string{"spec.schedules[0].start: ", "; ", "spec.formula.expression: "}},
		{name: "update adding an error", body: review("UPDATE", "MetricAutoscaler", object(heavy, goodCron, goodZone), object(goodExpr, goodCron, goodZone)),
			code: 422, says: []string{"spec.formula.expression: ", "exceeds the limit"}},
		// Admitted while the webhook was down: its error stays, the
		// update adds none.
		{name: "update keeping an old error", body: review("UPDATE", "MetricAutoscaler", object(heavy, "0 9 * * *", goodZone), object(heavy, goodCron, goodZone)), allowed: true},
		{name: "update keeping an old error, adding one", body: review("UPDATE", "MetricAutoscaler", object(heavy, "0 99 * * *", goodZone), object(heavy, goodCron, goodZone)),
			code: 422, says: []string{"spec.schedules[0].start: "}},
		{name: "delete", body: review("DELETE", "MetricAutoscaler", "null", object(heavy, goodCron, goodZone)), allowed: true},
		{name: "wrong kind", body: review("CREATE", "HorizontalPodAutoscaler", object(goodExpr, goodCron, goodZone), ""),
			code: 400, says: []string{"this webhook checks autoscaling.metricscale.dev/v1alpha1 MetricAutoscaler", "HorizontalPodAutoscaler"}},
		{name: "undecodable object", body: review("CREATE", "MetricAutoscaler", `{"spec": {"maxReplicas": "ten"}}`, ""),
			code: 400, says: []string{"decoding the object: "}},
		{name: "no object", body: review("CREATE", "MetricAutoscaler", "null", ""),
			code: 400, says: []string{"decoding the object: empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := post(t, tc.body)
			if w.Code != http.StatusOK {
				t.Fatalf("HTTP %d: %s", w.Code, w.Body)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" {
				t.Errorf("answered as %s %s", out.APIVersion, out.Kind)
			}
			resp := out.Response
			if resp == nil {
				t.Fatalf("no response: %s", w.Body)
			}
			if resp.UID != "705ab4f5-6393-11e8-b7cc-42010a800002" {
				t.Errorf("uid %q, want the request's", resp.UID)
			}
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed %v, want %v: %+v", resp.Allowed, tc.allowed, resp.Result)
			}
			if tc.allowed {
				return
			}
			if resp.Result == nil || resp.Result.Code != tc.code {
				t.Fatalf("result %+v, want code %d", resp.Result, tc.code)
			}
			last := 0
			for _, s := range tc.says {
				i := strings.Index(resp.Result.Message[last:], s)
				if i < 0 {
					t.Fatalf("message %q lacks %q (after offset %d)", resp.Result.Message, s, last)
				}
				last += i + len(s)
			}
		})
	}
}

// TestInvalidCauses: each error is a cause naming its field, for clients
// that read them (kubectl shows the message).
func TestInvalidCauses(t *testing.T) {
	t.Parallel()
	w := post(t, review("CREATE", "MetricAutoscaler", object("orders +", "0 25 * * *", goodZone), ""))
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	d := out.Response.Result.Details
	if d == nil || d.Kind != "MetricAutoscaler" || d.Group != "autoscaling.metricscale.dev" || d.Name != "orders" {
		t.Fatalf("details %+v", d)
	}
	fields := map[string]bool{}
	for _, c := range d.Causes {
		fields[c.Field] = true
		if c.Message == "" || strings.HasPrefix(c.Message, c.Field) {
			t.Errorf("cause %+v: its message should say what is wrong, without the field", c)
		}
	}
	if !fields["spec.formula.expression"] || !fields["spec.schedules[0].start"] || len(d.Causes) != 2 {
		t.Errorf("causes %+v, want spec.formula.expression and spec.schedules[0].start", d.Causes)
	}
}

// TestBadRequests: what is not an AdmissionReview gets an HTTP error.
func TestBadRequests(t *testing.T) {
	t.Parallel()
	big := review("CREATE", "MetricAutoscaler", object(strings.Repeat(" ", MaxBodyBytes), goodCron, goodZone), "")
	for _, tc := range []struct {
		name, method, contentType, body string
		code                            int
		says                            string
	}{
		{"GET", http.MethodGet, "application/json", "", http.StatusMethodNotAllowed, "POST"},
		{"YAML", http.MethodPost, "application/yaml", "{}", http.StatusUnsupportedMediaType, "application/json"},
		{"not JSON", http.MethodPost, "application/json", "request:", http.StatusBadRequest, "decoding the AdmissionReview"},
		{"v1beta1", http.MethodPost, "application/json", `{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}}`, http.StatusBadRequest, "admission.k8s.io/v1 AdmissionReview is needed"},
		{"no request", http.MethodPost, "application/json", `{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}`, http.StatusBadRequest, "no request"},
		{"too large", http.MethodPost, "application/json", big, http.StatusRequestEntityTooLarge, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(tc.method, Path, strings.NewReader(tc.body))
			r.Header.Set("Content-Type", tc.contentType)
			w := httptest.NewRecorder()
			(&Handler{}).ServeHTTP(w, r)
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.says) {
				t.Errorf("HTTP %d %q, want %d with %q", w.Code, w.Body, tc.code, tc.says)
			}
		})
	}
}
