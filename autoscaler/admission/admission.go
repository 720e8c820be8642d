// Package admission is the MetricAutoscalers' validating admission webhook:
// kube-apiserver posts an admission.k8s.io/v1 AdmissionReview for each
// create and update, and the webhook refuses a spec validation.Object
// refuses. The CRD's schema and CEL rules check most of it already; what
// only the webhook checks is what x-kubernetes-validations cannot: a
// formula's expression that does not compile, is not a number or costs
// more than the formula package's limit, and a schedule's cron expression
// or time zone. Each error is listed as "field: what is wrong".
package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/validation"
)

// Path is where the webhook is served; the ValidatingWebhookConfigurations
// of manifests/ name it.
const Path = "/validate-metricautoscaler"

// MaxBodyBytes bounds a review's body: kube-apiserver takes requests of up
// to 3 MiB, and an update's review carries the object and the old object.
const MaxBodyBytes = 8 << 20

const kind = "MetricAutoscaler"

// Handler serves the webhook.
type Handler struct {
	// Options are the validation's; ScaleToZero should be true, since
	// the CRD accepts minReplicas 0 whatever the controller's gates.
	Options validation.Options
}

// ServeHTTP answers an AdmissionReview. A request that is not one (method,
// content type, size, JSON, apiVersion) gets an HTTP error, which
// kube-apiserver treats as a failed call (failurePolicy decides); a review
// of something the webhook cannot check gets a denial with code 400.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	logger := klog.FromContext(r.Context())
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "an AdmissionReview is POSTed", http.StatusMethodNotAllowed)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, fmt.Sprintf("content type %q: application/json is needed", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("the review is larger than %d bytes", MaxBodyBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading the review: "+err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		http.Error(w, "decoding the AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	if gvk := review.GroupVersionKind(); gvk != admissionv1.SchemeGroupVersion.WithKind("AdmissionReview") {
		http.Error(w, fmt.Sprintf("an admission.k8s.io/v1 AdmissionReview is needed, got %s %q (admissionReviewVersions: [v1])", gvk.GroupVersion(), gvk.Kind), http.StatusBadRequest)
		return
	}
	if review.Request == nil {
		http.Error(w, "the AdmissionReview has no request", http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := h.review(req)
	resp.UID = req.UID
	if !resp.Allowed {
		logger.V(2).Info("Denied a MetricAutoscaler", "operation", req.Operation, "namespace", req.Namespace, "name", req.Name, "code", resp.Result.Code, "message", resp.Result.Message)
	}
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		logger.Error(err, "Writing the admission response", "namespace", req.Namespace, "name", req.Name)
	}
}

// review decides on one request.
func (h *Handler) review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	want := v1alpha1.GroupVersion.WithKind(kind)
	if got := req.Kind; got.Group != want.Group || got.Version != want.Version || got.Kind != want.Kind {
		return badRequest(fmt.Sprintf("this webhook checks %s/%s %s, got %s/%s %s: check the webhook configuration's rules", want.Group, want.Version, want.Kind, got.Group, got.Version, got.Kind))
	}
	// Only the spec is checked: nothing to do for a subresource (status,
	// written by the controller) or a delete or connect.
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	ma, err := decode(req.Object.Raw)
	if err != nil {
		return badRequest("decoding the object: " + err.Error())
	}
	path := field.NewPath("spec")
	errs := validation.Object(&ma.Spec, path, h.Options)
	if req.Operation == admissionv1.Update && len(errs) > 0 {
		// An object admitted while the webhook was unreachable
		// (failurePolicy Ignore) keeps its errors: an update is refused
		// only for the errors it adds, so that labels, finalizers and
		// unrelated fields can still change, as the CRD's validation
		// ratcheting allows.
		old, err := decode(req.OldObject.Raw)
		if err != nil {
			return badRequest("decoding the old object: " + err.Error())
		}
		errs = added(errs, validation.Object(&old.Spec, path, h.Options))
	}
	if len(errs) == 0 {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	name := ma.Name
	if name == "" {
		name = req.Name
	}
	return &admissionv1.AdmissionResponse{Result: invalid(name, errs)}
}

func decode(raw []byte) (*v1alpha1.MetricAutoscaler, error) {
	if len(raw) == 0 {
		return nil, errors.New("empty")
	}
	ma := &v1alpha1.MetricAutoscaler{}
	if err := json.Unmarshal(raw, ma); err != nil {
		return nil, fmt.Errorf("as a %s: %w", kind, err)
	}
	return ma, nil
}

// added are the errors of errs that old does not have.
func added(errs, old field.ErrorList) field.ErrorList {
	had := map[string]bool{}
	for _, e := range old {
		had[validation.Describe(e)] = true
	}
	var out field.ErrorList
	for _, e := range errs {
		if !had[validation.Describe(e)] {
			out = append(out, e)
		}
	}
	return out
}

// invalid is the API server's own refusal of an invalid object (422), each
// error a cause and a "field: what is wrong" of the message.
func invalid(name string, errs field.ErrorList) *metav1.Status {
	msgs := make([]string, 0, len(errs))
	causes := make([]metav1.StatusCause, 0, len(errs))
	for _, e := range errs {
		d := validation.Describe(e)
		msgs = append(msgs, d)
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseType(e.Type), Field: e.Field, Message: strings.TrimPrefix(d, e.Field+": ")})
	}
	return &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
		Message: fmt.Sprintf("%s %q is invalid: %s", kind, name, strings.Join(msgs, "; ")),
		Details: &metav1.StatusDetails{Name: name, Group: v1alpha1.GroupVersion.Group, Kind: kind, Causes: causes},
	}
}

func badRequest(msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest, Message: msg,
	}}
}
