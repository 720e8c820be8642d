package providers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestErrorsMapToAPISemantics(t *testing.T) {
	t.Parallel()
	pods := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		name     string
		err      error
		code     int32
		reason   Reason
		contains []string
	}{
		{"unknown custom metric", NewUnknownMetric(pods, "rps"), 404, ReasonUnknownMetric, []string{"rps", "pods"}},
		{"unknown external metric", NewUnknownMetric(schema.GroupResource{}, "queue"), 404, ReasonUnknownMetric, []string{`"queue" not found`}},
		{"unknown resource", NewUnknownResource(schema.GroupResource{Resource: "widgets"}), 404, ReasonUnknownMetric, []string{"widgets"}},
		{"no value for object", NewObjectNotFound(pods, "rps", "default/web-1"), 404, ReasonNoValue, []string{"rps", "default/web-1"}},
		{"stale", NewStale("rps", "pods default/web-1", time.Unix(0, 0), time.Minute), 404, ReasonStale, []string{"stale", "1m0s", "1970-01-01T00:00:00Z"}},
		{"bad selector", NewBadSelector("a in (", errors.New("unterminated")), 400, ReasonBadSelector, []string{`"a in ("`, "unterminated"}},
		{"backend", NewBackendError("prom", errors.New("connection refused")), 503, ReasonBackend, []string{`"prom"`, "connection refused"}},
		{"timeout", NewBackendError("prom", fmt.Errorf("query: %w", context.DeadlineExceeded)), 503, ReasonBackend, []string{"did not answer in time"}},
		{"wrapped provider error", ToAPIError("m", fmt.Errorf("memory: %w", NewStale("q", "x", time.Unix(0, 0), time.Second))), 404, ReasonStale, []string{"stale"}},
		{"wrapped apierror", ToAPIError("m", fmt.Errorf("lookup: %w", apierrors.NewNotFound(pods, "x"))), 404, ReasonNoValue, nil},
		{"plain error", ToAPIError("prom", errors.New("EOF")), 503, ReasonBackend, []string{`"prom"`, "EOF"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, ok := tc.err.(apierrors.APIStatus) // the API server asserts the type directly
			if !ok {
				t.Fatalf("%T is not an APIStatus", tc.err)
			}
			if st.Status().Code != tc.code {
				t.Errorf("code %d, want %d", st.Status().Code, tc.code)
			}
			if r := ReasonOf(tc.err); r != tc.reason {
				t.Errorf("reason %s, want %s", r, tc.reason)
			}
			for _, c := range tc.contains {
				if !strings.Contains(tc.err.Error(), c) {
					t.Errorf("%q does not contain %q", tc.err, c)
				}
			}
		})
	}
	if ToAPIError("x", nil) != nil {
		t.Error("ToAPIError(nil) != nil")
	}
	cause := errors.New("root cause")
	if !errors.Is(NewBackendError("p", cause), cause) {
		t.Error("backend error does not wrap its cause")
	}
}
