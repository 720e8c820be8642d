package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/metricscale/metricscale/providers/naming"
)

// Reason classifies a provider error; it is the "reason" label of the
// adapter's error metrics.
type Reason string

// The reasons a query can fail.
const (
	ReasonUnknownMetric Reason = "unknown_metric" // 404: no such metric
	ReasonNoValue       Reason = "no_value"       // 404: metric exists, not for this object/selection
	ReasonStale         Reason = "stale"          // 404: only values older than max age
	ReasonBadSelector   Reason = "bad_selector"   // 400
	ReasonBackend       Reason = "backend"        // 503: the backend failed or timed out
)

// Error is a provider error with API semantics: the API server answers with
// Status(); errors.Is/As see the wrapped cause.
type Error struct {
	Reason Reason
	status metav1.Status
	cause  error
}

func (e *Error) Error() string { return e.status.Message }

// Status makes Error an apierrors.APIStatus, so the API server answers with
// its code and message.
func (e *Error) Status() metav1.Status { return e.status }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.cause }

// Code is the HTTP status code of the error.
func (e *Error) Code() int { return int(e.status.Code) }

func newError(reason Reason, se *apierrors.StatusError, cause error) *Error {
	return &Error{Reason: reason, status: se.ErrStatus, cause: cause}
}

// NewUnknownMetric is a 404 for a metric the provider does not have at all.
// gr is the resource asked about (empty for external metrics).
func NewUnknownMetric(gr schema.GroupResource, metric string) *Error {
	if gr.Empty() {
		return newError(ReasonUnknownMetric, apierrors.NewNotFound(schema.GroupResource{Group: "external.metrics.k8s.io", Resource: "metric"}, metric), nil)
	}
	return newError(ReasonUnknownMetric, provider.NewMetricNotFoundError(gr, metric), nil)
}

// NewKindNotServed is a 404 for a metric routed to a provider that does not
// serve its kind (a custom metric routed to an external-only backend).
func NewKindNotServed(gr schema.GroupResource, metric, providerName string) *Error {
	kind := "custom"
	if gr.Empty() {
		kind = "external"
	}
	se := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("the server could not find the %s metric %s: it is routed to provider %q, which serves no %s metrics", kind, metric, providerName, kind),
	}}
	return newError(ReasonUnknownMetric, se, nil)
}

// NewUnknownResource is a 404 for a resource the cluster does not serve.
func NewUnknownResource(gr schema.GroupResource) *Error {
	return newError(ReasonUnknownMetric, apierrors.NewNotFound(schema.GroupResource{Group: "meta.k8s.io", Resource: "resource"}, gr.String()), nil)
}

// NewObjectNotFound is a 404 for a metric that exists but has no value for
// the named object.
func NewObjectNotFound(gr schema.GroupResource, metric, object string) *Error {
	return newError(ReasonNoValue, provider.NewMetricNotFoundForError(gr, metric, object), nil)
}

// NewNoValue is a 404 for a metric that exists but has no series matching a
// query; what describes the query ("namespace default with selector a=b").
func NewNoValue(metric, what string) *Error {
	se := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("the server could not find the metric %s for %s", metric, what),
	}}
	return newError(ReasonNoValue, se, nil)
}

// NewStale is a 404 for a metric whose only values are older than maxAge.
// what names the object or the selection.
func NewStale(metric, what string, newest time.Time, maxAge time.Duration) *Error {
	se := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusNotFound,
		Reason: metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("the metric %s for %s is stale: its newest value is from %s, older than the maximum age %s",
			metric, what, newest.UTC().Format(time.RFC3339), maxAge),
	}}
	return newError(ReasonStale, se, nil)
}

// NewBadSelector is a 400 for a selector the provider cannot use.
func NewBadSelector(selector string, cause error) *Error {
	return newError(ReasonBadSelector, apierrors.NewBadRequest(fmt.Sprintf("invalid selector %q: %v", selector, cause)), cause)
}

// NewBackendError is a 503 carrying the backend's reason.
func NewBackendError(providerName string, cause error) *Error {
	msg := fmt.Sprintf("metrics provider %q is unavailable: %v", providerName, cause)
	if errors.Is(cause, context.DeadlineExceeded) {
		msg = fmt.Sprintf("metrics provider %q did not answer in time: %v", providerName, cause)
	}
	return newError(ReasonBackend, apierrors.NewServiceUnavailable(msg), cause)
}

// ReasonOf classifies any error returned by a provider; errors that are not
// an *Error count as backend errors.
func ReasonOf(err error) Reason {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Reason
	}
	var ur *naming.UnknownResourceError
	if errors.As(err, &ur) {
		return ReasonUnknownMetric
	}
	switch {
	case apierrors.IsNotFound(err):
		return ReasonNoValue
	case apierrors.IsBadRequest(err):
		return ReasonBadSelector
	}
	return ReasonBackend
}

// ToAPIError returns err in a form the API server answers with its own code:
// an *Error or an apierrors.APIStatus is returned as found (unwrapped from
// any %w chain), anything else becomes a 503 naming the provider.
func ToAPIError(providerName string, err error) error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	var ur *naming.UnknownResourceError
	if errors.As(err, &ur) {
		return NewUnknownResource(ur.GR)
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		if e, ok := st.(error); ok {
			return e
		}
	}
	return NewBackendError(providerName, err)
}

// ReasonNotAllowed: 400, the query needs a resource the adapter is not
// configured to watch.
const ReasonNotAllowed Reason = "not_allowed"

// NewResourceNotAllowed is a 400 for a selector query on a resource the
// adapter does not watch; allowed lists the ones it does.
func NewResourceNotAllowed(gr schema.GroupResource, allowed []string) *Error {
	msg := fmt.Sprintf("selector queries on %s are not allowed: the adapter watches only %v; to allow it, add %q to selectorResources in the adapter config and grant the adapter list and watch on it (manifests/adapter/rbac.yaml)",
		gr, allowed, gr.String())
	return newError(ReasonNotAllowed, apierrors.NewBadRequest(msg), nil)
}

// ReasonTooManyItems: 400, an answer would hold more items than allowed.
const ReasonTooManyItems Reason = "too_many_items"

// NewTooManyItems is a 400 for a query whose answer would hold more than
// limit items; what describes the query.
func NewTooManyItems(metric, what string, limit int) *Error {
	msg := fmt.Sprintf("the metric %s for %s matches more than %d series, the most one answer holds: narrow the selector", metric, what, limit)
	return newError(ReasonTooManyItems, apierrors.NewBadRequest(msg), nil)
}
