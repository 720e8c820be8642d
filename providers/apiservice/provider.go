// Package apiservice is the federation provider (type "apiservice"): it
// forwards the metric names routed to it to another custom/external
// metrics adapter — KEDA's metrics server, prometheus-adapter, Datadog's
// cluster agent, another metricscale — over HTTPS, authenticating as this
// adapter (a ServiceAccount token or a client certificate). With it,
// metricscale holds the metrics APIServices and the other adapters keep
// serving behind it.
//
// What a caller gets:
//   - selectors, namespaces and object names passed to the remote as the
//     HPA sent them (labelSelector, metricLabelSelector);
//   - the remote's 404 as a 404 naming the metric; an empty list too;
//   - the remote down, slow, failing (5xx) or refusing this adapter
//     (401/403) as a 503 naming this provider, never an old value;
//   - discovery from the remote's own, refreshed every discoveryInterval in
//     the background: a discovery call never waits for the remote;
//   - identical concurrent queries sent once.
package apiservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmv1beta1 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta1"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	"k8s.io/metrics/pkg/apis/external_metrics"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/backendhttp"
	"github.com/metricscale/metricscale/providers/ondemand"
)

// Type is the config type of this provider.
const Type = "apiservice"

// API groups forwarded.
const (
	customGroup   = "custom.metrics.k8s.io"
	externalGroup = "external.metrics.k8s.io"
)

// Factory builds apiservice providers.
type Factory struct{}

var _ providers.Factory = Factory{}

// Validate implements providers.Factory; it reads no file.
func (Factory) Validate(field string, raw json.RawMessage) error {
	_, err := decodeOptions(field, raw)
	return err
}

// New implements providers.Factory. It does not contact the remote: the
// first discovery runs in Run, and a remote that is down makes queries
// fail with a 503, not the adapter.
func (Factory) New(name string, raw json.RawMessage, deps providers.Deps) (providers.Provider, error) {
	s, err := decodeOptions("options", raw)
	if err != nil {
		return nil, fmt.Errorf("apiservice provider %q: %w", name, err)
	}
	p := newProvider(name, s, deps.Clock)
	p.feed = ondemand.NewQueryFeed(name, deps.Changes, s.Feed(), p.clock, p.externalMetric)
	klog.InfoS("Federating metrics to a remote adapter", "provider", name, "remote", s.describe(), "discoveryInterval", s.discoveryInterval)
	switch {
	case s.custom == VersionDisabled:
		return externalOnly{p}, nil
	case s.external == VersionDisabled:
		return customOnly{p}, nil
	}
	return p, nil
}

func newProvider(name string, s *settings, clk clock.PassiveClock) *Provider {
	if clk == nil {
		clk = clock.RealClock{}
	}
	p := &Provider{
		name: name, s: s, client: newHTTPClient(s), clock: clk,
		// TTL 0: nothing is cached, identical concurrent queries share a call.
		answers: ondemand.NewLoader[[]byte](0, s.timeout, clk),
	}
	p.disc.Store(&discovery{})
	return p
}

// Provider forwards custom and external metrics to a remote adapter.
type Provider struct {
	name    string
	s       *settings
	client  *http.Client
	clock   clock.PassiveClock
	answers *ondemand.Loader[[]byte]
	calls   atomic.Uint64
	feed    *ondemand.QueryFeed // nil: no change feed polling

	disc      atomic.Pointer[discovery]
	refreshMu sync.Mutex

	mu      sync.Mutex
	lastErr error
	lastAt  time.Time
}

var (
	_ providers.CustomProvider   = (*Provider)(nil)
	_ providers.ExternalProvider = (*Provider)(nil)
	_ providers.Runner           = (*Provider)(nil)
	_ providers.HealthReporter   = (*Provider)(nil)
)

// Name implements providers.Provider.
func (p *Provider) Name() string { return p.name }

// RemoteCalls is the number of requests sent to the remote.
func (p *Provider) RemoteCalls() uint64 { return p.calls.Load() }

func (p *Provider) record(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr, p.lastAt = err, p.clock.Now()
}

// Health implements providers.HealthReporter: the result of the last call
// to the remote. It does not gate /readyz: a remote outage must fail only
// the metrics routed here.
func (p *Provider) Health() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastErr != nil {
		return fmt.Errorf("last call to %s at %s failed: %w", p.s.base.Redacted(), p.lastAt.UTC().Format(time.RFC3339), p.lastErr)
	}
	return nil
}

// Close releases idle connections.
func (p *Provider) Close() error {
	p.client.CloseIdleConnections()
	return nil
}

// ---------------------------------------------------------------- discovery

// discovery is the remote's discovery as last read.
type discovery struct {
	// customVersion is the custom.metrics.k8s.io version the remote
	// serves, "" while unknown.
	customVersion string
	custom        []providers.CustomMetricInfo
	customSet     map[providers.CustomMetricInfo]bool
	external      []providers.ExternalMetricInfo
	externalSet   map[string]bool
	// customKnown and externalKnown say the lists were read at least once.
	customKnown, externalKnown bool
}

// retryInterval is how soon a failed discovery read is retried, when
// sooner than discoveryInterval: a remote that starts after this adapter
// is listed within seconds.
const retryInterval = 10 * time.Second

// Run refreshes discovery now and every discoveryInterval (sooner after a
// failure) until ctx is done; with a change feed, it polls the subscribers'
// External queries meanwhile.
func (p *Provider) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { p.feed.Run(ctx) })
	failing := false
	for {
		next := p.s.discoveryInterval
		err := p.Refresh(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			next = min(next, retryInterval)
			// one error when the remote goes away, not one every retry
			if !failing {
				klog.ErrorS(err, "Reading the remote adapter's discovery failed; serving the last list", "provider", p.name, "remote", p.s.base.Redacted(), "retryIn", next)
			} else {
				klog.V(2).InfoS("Reading the remote adapter's discovery still fails", "provider", p.name, "err", err)
			}
			failing = true
		case failing:
			klog.InfoS("Reading the remote adapter's discovery works again", "provider", p.name, "remote", p.s.base.Redacted())
			failing = false
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Refresh reads the remote's discovery and replaces the cached lists. A
// kind whose read fails keeps its last list; a group the remote does not
// serve (404) lists nothing.
func (p *Provider) Refresh(ctx context.Context) error {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, p.s.timeout)
	defer cancel()
	old := p.disc.Load()
	d := *old
	var errs []error
	if p.s.custom != VersionDisabled {
		version, list, err := p.discoverCustom(ctx)
		if err != nil {
			errs = append(errs, err)
		} else {
			d.customVersion, d.custom, d.customKnown = version, list, true
			d.customSet = make(map[providers.CustomMetricInfo]bool, len(list))
			for _, m := range list {
				d.customSet[m] = true
			}
		}
	}
	if p.s.external != VersionDisabled {
		list, err := p.discoverExternal(ctx)
		if err != nil {
			errs = append(errs, err)
		} else {
			d.external, d.externalKnown = list, true
			d.externalSet = make(map[string]bool, len(list))
			for _, m := range list {
				d.externalSet[m.Metric] = true
			}
		}
	}
	p.disc.Store(&d)
	err := errors.Join(errs...)
	p.record(healthOf(err))
	klog.V(2).InfoS("Read the remote adapter's discovery", "provider", p.name, "customVersion", d.customVersion,
		"customMetrics", len(d.custom), "externalMetrics", len(d.external), "err", err)
	return err
}

func (p *Provider) resourceList(ctx context.Context, group, version string) (*metav1.APIResourceList, error) {
	body, err := p.get(ctx, "/apis/"+group+"/"+version, "")
	if err != nil {
		return nil, err
	}
	var rl metav1.APIResourceList
	if err := json.Unmarshal(body, &rl); err != nil {
		return nil, fmt.Errorf("decoding the discovery of %s/%s: %w", group, version, err)
	}
	return &rl, nil
}

func isNotFound(err error) bool {
	var re *remoteError
	return errors.As(err, &re) && re.code == http.StatusNotFound
}

// discoverCustom lists the remote's custom metrics from the first version
// it serves; a remote serving none lists nothing.
func (p *Provider) discoverCustom(ctx context.Context) (string, []providers.CustomMetricInfo, error) {
	for _, v := range p.s.customVersions("") {
		rl, err := p.resourceList(ctx, customGroup, v)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("%s/%s: %w", customGroup, v, err)
		}
		seen := map[providers.CustomMetricInfo]bool{}
		var out []providers.CustomMetricInfo
		for _, r := range rl.APIResources {
			// "pods/http_requests", "deployments.apps/queue_depth"
			res, metric, ok := strings.Cut(r.Name, "/")
			if !ok || res == "" || metric == "" {
				continue
			}
			m := providers.CustomMetricInfo{GroupResource: schema.ParseGroupResource(res), Namespaced: r.Namespaced, Metric: metric}
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
		return v, out, nil
	}
	return "", nil, nil
}

func (p *Provider) discoverExternal(ctx context.Context) ([]providers.ExternalMetricInfo, error) {
	rl, err := p.resourceList(ctx, externalGroup, p.s.external)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", externalGroup, p.s.external, err)
	}
	seen := map[string]bool{}
	var out []providers.ExternalMetricInfo
	for _, r := range rl.APIResources {
		if r.Name == "" || strings.Contains(r.Name, "/") || seen[r.Name] {
			continue
		}
		seen[r.Name] = true
		out = append(out, providers.ExternalMetricInfo{Metric: r.Name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Metric < out[j].Metric })
	return out, nil
}

// ListAllMetrics implements providers.CustomProvider: the remote's list as
// last read; it never calls the remote.
func (p *Provider) ListAllMetrics() []providers.CustomMetricInfo {
	return append([]providers.CustomMetricInfo(nil), p.disc.Load().custom...)
}

// ListAllExternalMetrics implements providers.ExternalProvider, as
// ListAllMetrics.
func (p *Provider) ListAllExternalMetrics() []providers.ExternalMetricInfo {
	return append([]providers.ExternalMetricInfo(nil), p.disc.Load().external...)
}

// ---------------------------------------------------------------- queries

// query is one remote request and how to describe it in errors.
type query struct {
	metric string
	gr     schema.GroupResource // empty for external metrics
	what   string               // "pod a/p1", "pods in namespace a with selector app=web"
}

// fetch sends GET path?q to the remote, sharing the call with identical
// concurrent queries, and turns failures into API errors.
func (p *Provider) fetch(ctx context.Context, q query, path string, params url.Values) ([]byte, error) {
	// A done context gets an error, never a value, even if one is at hand.
	if err := ctx.Err(); err != nil {
		return nil, providers.NewBackendError(p.name, fmt.Errorf("%s for %s: %w", q.metric, q.what, err))
	}
	ctx, cancel := context.WithTimeout(ctx, p.s.timeout)
	defer cancel()
	raw := params.Encode()
	body, err := p.answers.Get(ctx, path+"?"+raw, func(ctx context.Context) ([]byte, error) {
		b, err := p.get(ctx, path, raw)
		p.record(healthOf(err))
		return b, err
	})
	if err == nil {
		return body, nil
	}
	return nil, p.apiError(ctx, q, err)
}

// healthOf is err as Health reports it: a 404 or a 400 is the remote
// answering, not failing.
func healthOf(err error) error {
	var re *remoteError
	if errors.As(err, &re) && (re.code == http.StatusNotFound || re.code == http.StatusBadRequest) {
		return nil
	}
	return err
}

// apiError maps a failed remote call to the answer the HPA gets.
func (p *Provider) apiError(ctx context.Context, q query, err error) error {
	var re *remoteError
	if errors.As(err, &re) {
		switch {
		case re.code == http.StatusNotFound:
			return p.notFound(q, "the remote adapter answered: "+re.msg)
		case re.code == http.StatusBadRequest:
			return apierrors.NewBadRequest(fmt.Sprintf("the remote adapter refused the query of %s for %s: %s", q.metric, q.what, re.msg))
		case re.code == http.StatusUnauthorized || re.code == http.StatusForbidden:
			err = fmt.Errorf("%w (the remote refuses this adapter's identity: check tokenFile/clientCert and the remote's RBAC for this adapter, see providers/apiservice/README.md)", err)
		}
	} else if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return p.backendError(q, err)
}

// backendError is the 503 for q, recorded for Health.
func (p *Provider) backendError(q query, err error) error {
	p.record(err)
	return providers.NewBackendError(p.name, fmt.Errorf("%s for %s from %s: %w", q.metric, q.what, p.s.base.Redacted(), err))
}

// notFound is the 404 for q: unknown metric when the remote's discovery,
// read successfully, does not list it (so unknown names do not become
// label values of the adapter's own metrics), otherwise no value.
func (p *Provider) notFound(q query, detail string) error {
	d := p.disc.Load()
	if q.gr.Empty() {
		if d.externalKnown && !d.externalSet[q.metric] {
			return providers.NewUnknownMetric(q.gr, q.metric)
		}
	} else if d.customKnown {
		listed := d.customSet[providers.CustomMetricInfo{GroupResource: q.gr, Namespaced: true, Metric: q.metric}] ||
			d.customSet[providers.CustomMetricInfo{GroupResource: q.gr, Namespaced: false, Metric: q.metric}]
		if !listed {
			return providers.NewUnknownMetric(q.gr, q.metric)
		}
	}
	what := q.what
	if detail != "" {
		what += " (" + detail + ")"
	}
	return providers.NewNoValue(q.metric, what)
}

func describeSelector(sel labels.Selector) string {
	if sel == nil || sel.Empty() {
		return ""
	}
	return fmt.Sprintf(" with metric selector %q", sel.String())
}

// customPath is the remote path of a custom metric query, unescaped (the
// request escapes it); name is "*" for a selector query. Names cannot hold
// a "/": object and metric names are validated by the API server.
func customPath(version string, gr schema.GroupResource, namespace, name, metric string) string {
	base := "/apis/" + customGroup + "/" + version
	if gr == (schema.GroupResource{Resource: "namespaces"}) {
		// metrics describing namespaces: /namespaces/NAME/metrics/METRIC
		return base + "/namespaces/" + name + "/metrics/" + metric
	}
	if namespace != "" {
		base += "/namespaces/" + namespace
	}
	return base + "/" + gr.String() + "/" + name + "/" + metric
}

// customList asks the remote for a custom metric list, trying the
// versions in order while the remote's version is not known yet (a 404
// from the first may mean it serves only the second).
func (p *Provider) customList(ctx context.Context, q query, namespace, name string, params url.Values) (*custom_metrics.MetricValueList, error) {
	versions := p.s.customVersions(p.disc.Load().customVersion)
	var err error
	for i, v := range versions {
		var body []byte
		body, err = p.fetch(ctx, q, customPath(v, q.gr, namespace, name, q.metric), params)
		if err != nil {
			if i < len(versions)-1 && providers.ReasonOf(err) == providers.ReasonNoValue {
				continue
			}
			return nil, err
		}
		if err := p.checkCount(q, v+" MetricValueList", body); err != nil {
			return nil, err
		}
		list, derr := decodeCustom(v, body)
		if derr != nil {
			return nil, p.backendError(q, derr)
		}
		return list, nil
	}
	return nil, err
}

func decodeCustom(version string, body []byte) (*custom_metrics.MetricValueList, error) {
	out := &custom_metrics.MetricValueList{}
	switch version {
	case VersionV1beta2:
		var in cmv1beta2.MetricValueList
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, fmt.Errorf("decoding the remote's %s MetricValueList: %w", version, err)
		}
		if err := cmv1beta2.Convert_v1beta2_MetricValueList_To_custom_metrics_MetricValueList(&in, out, nil); err != nil {
			return nil, err
		}
	default:
		var in cmv1beta1.MetricValueList
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, fmt.Errorf("decoding the remote's %s MetricValueList: %w", version, err)
		}
		if err := cmv1beta1.Convert_v1beta1_MetricValueList_To_custom_metrics_MetricValueList(&in, out, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func objectName(gr schema.GroupResource, name types.NamespacedName) string {
	if name.Namespace == "" {
		return gr.String() + " " + name.Name
	}
	return gr.String() + " " + name.Namespace + "/" + name.Name
}

// GetMetricByName implements providers.CustomProvider.
func (p *Provider) GetMetricByName(ctx context.Context, name types.NamespacedName, info providers.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	q := query{metric: info.Metric, gr: info.GroupResource, what: objectName(info.GroupResource, name) + describeSelector(metricSelector)}
	params := url.Values{}
	if metricSelector != nil && !metricSelector.Empty() {
		params.Set("metricLabelSelector", metricSelector.String())
	}
	list, err := p.customList(ctx, q, name.Namespace, name.Name, params)
	if err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, p.notFound(q, "the remote adapter answered no value")
	}
	for i := range list.Items {
		if err := p.checkCustomItem(q, &list.Items[i], name.Namespace, name.Name); err != nil {
			return nil, err
		}
	}
	mv := list.Items[0]
	return &mv, nil
}

// GetMetricBySelector implements providers.CustomProvider.
func (p *Provider) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info providers.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	what := info.GroupResource.String()
	if namespace != "" {
		what += " in namespace " + namespace
	}
	params := url.Values{}
	if selector != nil && !selector.Empty() {
		params.Set("labelSelector", selector.String())
		what += fmt.Sprintf(" with selector %q", selector.String())
	}
	if metricSelector != nil && !metricSelector.Empty() {
		params.Set("metricLabelSelector", metricSelector.String())
	}
	q := query{metric: info.Metric, gr: info.GroupResource, what: what + describeSelector(metricSelector)}
	list, err := p.customList(ctx, q, namespace, "*", params)
	if err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, p.notFound(q, "the remote adapter answered an empty list")
	}
	for i := range list.Items {
		if err := p.checkCustomItem(q, &list.Items[i], namespace, ""); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// GetExternalMetric implements providers.ExternalProvider.
func (p *Provider) GetExternalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info providers.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	list, err := p.externalMetric(ctx, namespace, metricSelector, info)
	if err == nil {
		p.feed.Queried(ctx, namespace, metricSelector, info.Metric, list)
	}
	return list, err
}

func (p *Provider) externalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info providers.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	q := query{metric: info.Metric, what: fmt.Sprintf("namespace %q", namespace)}
	params := url.Values{}
	if metricSelector != nil && !metricSelector.Empty() {
		params.Set("labelSelector", metricSelector.String())
		q.what += fmt.Sprintf(" with selector %q", metricSelector.String())
	}
	if namespace == "" {
		return nil, providers.NewNoValue(info.Metric, "no namespace (external metrics are namespaced)")
	}
	path := "/apis/" + externalGroup + "/" + p.s.external + "/namespaces/" + namespace + "/" + info.Metric
	body, err := p.fetch(ctx, q, path, params)
	if err != nil {
		return nil, err
	}
	if err := p.checkCount(q, "ExternalMetricValueList", body); err != nil {
		return nil, err
	}
	var in emv1beta1.ExternalMetricValueList
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, p.backendError(q, fmt.Errorf("decoding the remote's ExternalMetricValueList: %w", err))
	}
	out := &external_metrics.ExternalMetricValueList{}
	if err := emv1beta1.Convert_v1beta1_ExternalMetricValueList_To_external_metrics_ExternalMetricValueList(&in, out, nil); err != nil {
		return nil, p.backendError(q, err)
	}
	if len(out.Items) == 0 {
		return nil, p.notFound(q, "the remote adapter answered an empty list")
	}
	for i := range out.Items {
		if got := out.Items[i].MetricName; !sameMetric(got, info.Metric) {
			return nil, p.refused(q, "an item of the metric %q", got)
		}
	}
	return out, nil
}

// ---------------------------------------------------------------- checks

// checkCount refuses an answer of more than maxItems items (a 400, as the
// other backends answer), counted before the items are decoded: a slice
// of empty structs costs nothing per item.
func (p *Provider) checkCount(q query, kind string, body []byte) error {
	var l struct {
		Items []struct{} `json:"items"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return p.backendError(q, fmt.Errorf("decoding the remote's %s: %w", kind, err))
	}
	if len(l.Items) > maxItems {
		return providers.NewTooManyItems(q.metric, q.what, maxItems)
	}
	return nil
}

// sameMetric compares the metric name of an item with the one asked for;
// without regard to case, as some adapters lower-case the names they serve.
func sameMetric(got, want string) bool { return strings.EqualFold(got, want) }

// checkCustomItem refuses an item that is not of the metric asked for, or
// that describes another object than the one named (name "", a selector
// query: in another namespace than the one asked for). The whole answer is
// refused, not the item dropped: the HPA sums or averages the items it
// gets, and a remote answering about something else is not to be trusted
// with the rest.
func (p *Provider) checkCustomItem(q query, it *custom_metrics.MetricValue, namespace, name string) error {
	if !sameMetric(it.Metric.Name, q.metric) {
		return p.refused(q, "an item of the metric %q", it.Metric.Name)
	}
	obj := it.DescribedObject
	switch {
	case name != "" && obj.Name != name,
		// a namespace's own metrics may name it as their namespace, or none
		q.gr == schema.GroupResource{Resource: "namespaces"} && obj.Namespace != "" && obj.Namespace != obj.Name,
		q.gr != schema.GroupResource{Resource: "namespaces"} && namespace != "" && obj.Namespace != namespace:
		return p.refused(q, "an item describing %s %q in namespace %q", obj.Kind, obj.Name, obj.Namespace)
	}
	return nil
}

// refused is the 503 for an answer that does not match the query; what
// comes from the remote is shown as a short, sanitised excerpt.
func (p *Provider) refused(q query, format string, args ...any) error {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = backendhttp.Excerpt([]byte(s))
		}
	}
	return p.backendError(q, fmt.Errorf("the remote adapter answered %s, not what was asked: answer refused", fmt.Sprintf(format, args...)))
}

// ---------------------------------------------------------------- one kind only

// customOnly is the provider with external disabled: the registry then
// answers a 404 naming it for external metrics routed here.
type customOnly struct{ p *Provider }

func (c customOnly) Name() string                                 { return c.p.Name() }
func (c customOnly) Run(ctx context.Context)                      { c.p.Run(ctx) }
func (c customOnly) Health() error                                { return c.p.Health() }
func (c customOnly) Close() error                                 { return c.p.Close() }
func (c customOnly) ListAllMetrics() []providers.CustomMetricInfo { return c.p.ListAllMetrics() }
func (c customOnly) GetMetricByName(ctx context.Context, name types.NamespacedName, info providers.CustomMetricInfo, msel labels.Selector) (*custom_metrics.MetricValue, error) {
	return c.p.GetMetricByName(ctx, name, info, msel)
}
func (c customOnly) GetMetricBySelector(ctx context.Context, ns string, sel labels.Selector, info providers.CustomMetricInfo, msel labels.Selector) (*custom_metrics.MetricValueList, error) {
	return c.p.GetMetricBySelector(ctx, ns, sel, info, msel)
}

// externalOnly is the provider with custom disabled.
type externalOnly struct{ p *Provider }

func (e externalOnly) Name() string            { return e.p.Name() }
func (e externalOnly) Run(ctx context.Context) { e.p.Run(ctx) }
func (e externalOnly) Health() error           { return e.p.Health() }
func (e externalOnly) Close() error            { return e.p.Close() }
func (e externalOnly) ListAllExternalMetrics() []providers.ExternalMetricInfo {
	return e.p.ListAllExternalMetrics()
}
func (e externalOnly) GetExternalMetric(ctx context.Context, ns string, msel labels.Selector, info providers.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	return e.p.GetExternalMetric(ctx, ns, msel, info)
}

var (
	_ providers.CustomProvider   = customOnly{}
	_ providers.ExternalProvider = externalOnly{}
)
