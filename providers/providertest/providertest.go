// Package providertest is the conformance suite every metrics provider's
// tests run: Run builds the provider through a small Harness over a fixed
// data set and checks, for each kind the provider serves (custom and
// external metrics), what the adapter relies on whatever the backend:
//
//   - an unknown metric, and a known metric asked for an object or a
//     namespace without a value, is a 404 whose message names the metric;
//   - a value older than the provider's window is never served: a provider
//     with a max age answers a 404 saying the value is stale; one without
//     (Harness.Stale false) must at least not serve it;
//   - namespaces are isolated: an external series scoped to namespace a is
//     not visible from b, and a custom metric of an object in a does not
//     answer for the object of the same name in b;
//   - metric label selectors filter series (=, ==, !=, in, notin, exists,
//     !exists), and > / < do what the harness says the provider documents
//     (a 400, or a numeric comparison as labels.Selector does);
//   - a cancelled or expired context yields an error, never a value, within
//     a second even while the backend hangs;
//   - discovery never blocks on the backend (100ms while it hangs), lists
//     the metrics the provider serves and, through a registry built over
//     the provider, is never empty.
//
// The data follow prometheus-adapter's default conventions, which every
// provider can map: custom metrics are named CustomPrefix+"...", their series
// name a pod by the labels "namespace" and "pod"; external metrics are named
// ExternalPrefix+"..." and scoped to the namespace of their "namespace"
// label. Pods are listed by the suite's ObjectLister (Deps.Objects).
package providertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/naming"
)

// Name prefixes of the suite's metrics, so a provider configured by rules
// (Prometheus) can select them.
const (
	CustomPrefix   = "conformance_custom_"
	ExternalPrefix = "conformance_external_"
)

// GtLt is what a metric selector with > or < does.
type GtLt int

const (
	// GtLtReject: the provider refuses the selector with a 400.
	GtLtReject GtLt = iota
	// GtLtFilter: the provider compares label values as integers, as
	// labels.Selector.Matches does.
	GtLtFilter
)

// Series is one series of the data: its latest value is Age old.
type Series struct {
	Name   string
	Labels map[string]string
	Value  float64
	Age    time.Duration
}

// Data is what a harness loads into the provider it builds.
type Data struct {
	// Now is the time of Deps.Clock; a series' sample is from Now-Age.
	Now    time.Time
	Series []Series
}

// Timestamp is when s was observed.
func (d Data) Timestamp(s Series) time.Time { return d.Now.Add(-s.Age) }

// Backend is a provider built by a harness.
type Backend struct {
	Provider providers.Provider
	// Hang makes the provider's backend stop answering queries until the
	// test ends; nil when the provider has no backend (it answers from
	// memory), and the suite then skips the hanging checks.
	Hang func()
}

// Harness tells the suite how to build a provider and what it documents.
type Harness struct {
	// New builds a provider serving data. deps carries the suite's
	// RESTMapper, resolver, object lister and clock; New fails t if it
	// cannot. It is called once per check, from parallel subtests.
	New func(t *testing.T, deps providers.Deps, data Data) Backend

	// Custom and External are the kinds the provider serves; the suite
	// checks that it implements exactly those interfaces.
	Custom, External bool

	// MaxAge is the oldest value the provider serves: its max age, or the
	// backend's lookback window.
	MaxAge time.Duration
	// Stale says the provider answers a value older than MaxAge with a 404
	// naming it stale (providers.ReasonStale). Without it the suite only
	// checks that such a value is never served.
	Stale bool
	// GtLt is what metric selectors with > or < do.
	GtLt GtLt
}

// The suite's metrics.
const (
	customRequests = CustomPrefix + "requests"
	customStale    = CustomPrefix + "stale"
	customMixed    = CustomPrefix + "mixed"
	externalQueue  = ExternalPrefix + "queue"
	externalStale  = ExternalPrefix + "stale"
	externalMixed  = ExternalPrefix + "mixed"
	unknownMetric  = CustomPrefix + "nope"
	unknownExt     = ExternalPrefix + "nope"
	staleValue     = 99 // only ever in series older than MaxAge
)

var podsGR = schema.GroupResource{Resource: "pods"}

func pod(ns, name string, v float64, age time.Duration, kv ...string) Series {
	l := map[string]string{"namespace": ns, "pod": name}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return Series{Name: customRequests, Labels: l, Value: v, Age: age}
}

func named(name string, s Series) Series {
	s.Name = name
	return s
}

func ext(name, ns string, v float64, age time.Duration, kv ...string) Series {
	l := map[string]string{"namespace": ns}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return Series{Name: name, Labels: l, Value: v, Age: age}
}

// data is the suite's data set for a provider whose window is maxAge.
func data(maxAge time.Duration) Data {
	fresh := time.Duration(0)
	stale := maxAge + time.Minute
	return Data{
		Now: time.Now().Truncate(time.Second),
		Series: []Series{
			pod("a", "p1", 1, fresh, "code", "200"),
			pod("a", "p2", 2, fresh, "code", "500"),
			pod("a", "only-a", 3, fresh, "code", "200"),
			pod("b", "p1", 10, fresh, "code", "200"),
			named(customStale, pod("a", "p1", staleValue, stale)),
			named(customMixed, pod("a", "p1", 1, fresh)),
			named(customMixed, pod("a", "p2", staleValue, stale)),

			ext(externalQueue, "a", 1, fresh, "queue", "q1", "shard", "1"),
			ext(externalQueue, "a", 2, fresh, "queue", "q2", "shard", "2"),
			ext(externalQueue, "b", 5, fresh, "queue", "q1", "shard", "1"),
			ext(externalStale, "a", staleValue, stale, "queue", "q1"),
			ext(externalMixed, "a", 1, fresh, "queue", "q1"),
			ext(externalMixed, "a", staleValue, stale, "queue", "q2"),
		},
	}
}

// objects is the suite's watch cache: pods by namespace and name.
var objects = map[string]map[string]labels.Set{
	"a": {"p1": {"app": "web"}, "p2": {"app": "web"}, "only-a": {"app": "web"}, "idle": {"app": "idle"}},
	"b": {"p1": {"app": "web"}, "only-a": {"app": "web"}, "idle": {"app": "idle"}},
	"c": {"idle": {"app": "idle"}},
}

type objectLister struct{}

func (objectLister) ListNames(ctx context.Context, gr schema.GroupResource, ns string, sel labels.Selector) ([]string, error) {
	if gr != podsGR {
		return nil, nil
	}
	var out []string
	for name, l := range objects[ns] {
		if sel.Matches(l) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Mapper is the suite's RESTMapper: core pods, services, nodes and
// namespaces, and apps deployments.
func Mapper() apimeta.RESTMapper {
	core := schema.GroupVersion{Version: "v1"}
	apps := schema.GroupVersion{Group: "apps", Version: "v1"}
	m := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{core, apps})
	m.Add(core.WithKind("Pod"), apimeta.RESTScopeNamespace)
	m.Add(core.WithKind("Service"), apimeta.RESTScopeNamespace)
	m.Add(core.WithKind("Node"), apimeta.RESTScopeRoot)
	m.Add(core.WithKind("Namespace"), apimeta.RESTScopeRoot)
	m.Add(apps.WithKind("Deployment"), apimeta.RESTScopeNamespace)
	return m
}

// env is one provider built for one check.
type env struct {
	h    *Harness
	data Data
	deps providers.Deps
	b    Backend
}

func (h *Harness) build(t *testing.T, empty bool) *env {
	t.Helper()
	d := data(h.MaxAge)
	if empty {
		d.Series = nil
	}
	mapper := Mapper()
	clk := clocktesting.NewFakePassiveClock(d.Now)
	deps := providers.Deps{
		Mapper: mapper, Resources: naming.NewResolver(mapper, clk), Objects: objectLister{},
		Clock: clk,
	}
	e := &env{h: h, data: d, deps: deps}
	e.b = h.New(t, deps, d)
	if e.b.Provider == nil {
		t.Fatal("harness built no provider")
	}
	return e
}

// hang makes the backend hang, or skips t when there is none.
func (e *env) hang(t *testing.T) {
	t.Helper()
	if e.b.Hang == nil {
		t.Skip("the provider has no backend to hang")
	}
	e.b.Hang()
}

// Run runs the conformance suite against the provider h builds.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("Harness.New is nil")
	}
	if h.MaxAge <= 0 {
		t.Fatal("Harness.MaxAge must be positive")
	}
	t.Run("kinds", func(t *testing.T) {
		t.Parallel()
		p := h.build(t, false).b.Provider
		_, custom := p.(providers.CustomProvider)
		_, external := p.(providers.ExternalProvider)
		if custom != h.Custom || external != h.External {
			t.Errorf("provider %T: implements custom %v, external %v; harness says custom %v, external %v",
				p, custom, external, h.Custom, h.External)
		}
		if p.Name() == "" {
			t.Error("provider has no name")
		}
	})
	if h.Custom {
		t.Run("custom", func(t *testing.T) { runCustom(t, &h) })
	}
	if h.External {
		t.Run("external", func(t *testing.T) { runExternal(t, &h) })
	}
	t.Run("registry", func(t *testing.T) { runRegistry(t, &h) })
}

// apiStatus returns the HTTP code and message err carries as an API
// error, as the API server would answer it.
func apiStatus(err error) (int, string) {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return int(st.Status().Code), st.Status().Message
	}
	return 0, err.Error()
}

// wantNotFound checks err is a 404 naming metric, and nothing was served.
func wantNotFound(t *testing.T, what string, served bool, err error, metric string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: want a 404 naming %s, got a value", what, metric)
		return
	}
	if served {
		t.Errorf("%s: a value came back with the error %v", what, err)
	}
	var pe *providers.Error
	code, msg := apiStatus(err)
	if !errors.As(err, &pe) && !apierrors.IsNotFound(err) {
		t.Errorf("%s: want a *providers.Error or a NotFound status, got %T: %v", what, err, err)
	}
	if code != http.StatusNotFound {
		t.Errorf("%s: want code 404, got %d: %v", what, code, err)
	}
	if !strings.Contains(msg, metric) {
		t.Errorf("%s: message %q does not name the metric %s", what, msg, metric)
	}
}

// wantStale checks err is the 404 for a value older than the window.
func wantStale(t *testing.T, h *Harness, what string, served bool, err error, metric string) {
	t.Helper()
	wantNotFound(t, what, served, err, metric)
	if err == nil || !h.Stale {
		return
	}
	if r := providers.ReasonOf(err); r != providers.ReasonStale {
		t.Errorf("%s: reason %s, want %s: %v", what, r, providers.ReasonStale, err)
	}
	if _, msg := apiStatus(err); !strings.Contains(msg, "stale") {
		t.Errorf("%s: message %q does not say the value is stale", what, msg)
	}
}

// wantBadRequest checks err is a 400.
func wantBadRequest(t *testing.T, what string, served bool, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: want a 400, got a value", what)
		return
	}
	if served {
		t.Errorf("%s: a value came back with the error %v", what, err)
	}
	if code, _ := apiStatus(err); code != http.StatusBadRequest {
		t.Errorf("%s: want code 400, got %d: %v", what, code, err)
	}
}

// wantFailedPromptly checks a call under a done context: an error that is
// not a 4xx (the metric exists; the HPA must not take it for gone), no
// value, within a second.
func wantFailedPromptly(t *testing.T, what string, served bool, err error, took time.Duration) {
	t.Helper()
	if took > time.Second {
		t.Errorf("%s: took %s, want under 1s", what, took)
	}
	if err == nil {
		t.Errorf("%s: want an error, got a value", what)
		return
	}
	if served {
		t.Errorf("%s: a value came back with the error %v", what, err)
	}
	code, _ := apiStatus(providers.ToAPIError("provider", err))
	if code < 500 {
		t.Errorf("%s: want a 5xx (the backend did not answer), got %d: %v", what, code, err)
	}
}

// doneContexts are the contexts a call must give up on: cancelled, and
// past its deadline.
func doneContexts() map[string]func() (context.Context, context.CancelFunc) {
	return map[string]func() (context.Context, context.CancelFunc){
		"cancelled": func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		},
		"expired": func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		},
		"times out": func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		},
	}
}

func mustSelector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatalf("selector %q: %v", s, err)
	}
	return sel
}

// timed runs fn and returns how long it took.
func timed(fn func()) time.Duration {
	start := time.Now()
	fn()
	return time.Since(start)
}

func describe(kv map[string]int64) string {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, kv[k])
	}
	return b.String()
}
