package app

import (
	"net/http"
	"net/http/httptest"
	"testing"

	apirequest "k8s.io/apiserver/pkg/endpoints/request"
)

func TestChangeFeedIsLongRunning(t *testing.T) {
	t.Parallel()
	inner := func(_ *http.Request, ri *apirequest.RequestInfo) bool { return ri.Verb == "watch" }
	check := withChangeFeedLongRunning(inner)
	for _, tc := range []struct {
		name string
		ri   apirequest.RequestInfo
		want bool
	}{
		{"the feed", apirequest.RequestInfo{Path: "/changes", Verb: "get"}, true},
		{"below the feed", apirequest.RequestInfo{Path: "/changes/x", Verb: "get"}, false},
		{"a resource named changes", apirequest.RequestInfo{IsResourceRequest: true, Path: "/changes", Resource: "changes", Verb: "get"}, false},
		{"a metric query", apirequest.RequestInfo{IsResourceRequest: true, Path: "/apis/external.metrics.k8s.io/v1beta1/namespaces/x/m", Verb: "list"}, false},
		{"what was long-running stays so", apirequest.RequestInfo{IsResourceRequest: true, Verb: "watch"}, true},
	} {
		if got := check(httptest.NewRequest(http.MethodGet, "/", nil), &tc.ri); got != tc.want {
			t.Errorf("%s: long-running %v, want %v", tc.name, got, tc.want)
		}
	}
}
