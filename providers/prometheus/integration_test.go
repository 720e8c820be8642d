package prometheus

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/naming"
	"github.com/metricscale/metricscale/providers/providertest"
)

// TestRealPrometheus runs the provider against a real Prometheus on a free
// loopback port, scraping a target served by the test itself.
func TestRealPrometheus(t *testing.T) {
	providertest.NeedPrometheus(t)
	t.Parallel()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, `# TYPE queue_messages_ready gauge
queue_messages_ready{namespace="default",queue="jobs"} 240
queue_messages_ready{namespace="default",queue="mail"} 3.5
queue_messages_ready{namespace="other",queue="jobs"} 1
# TYPE inflight_requests gauge
inflight_requests{namespace="default",pod="web-0"} 4
inflight_requests{namespace="default",pod="web-1"} 6
inflight_requests{namespace="default",pod="web-1",path="x"} 1
`)
	}))
	defer target.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := startPrometheus(t, target.URL)

	rulesYAML := `
rules:
- seriesQuery: '{__name__="inflight_requests",namespace!="",pod!=""}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__="queue_messages_ready"}'
  resources: {overrides: {namespace: {resource: namespace}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
- seriesQuery: '{__name__="queue_messages_ready"}'
  name: {as: broken_query}
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by ('
`
	o, err := OptionsFromAdapterConfig([]byte(rulesYAML), AdapterFlags{PrometheusURL: url, MetricsRelistInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	mapper := testMapper()
	pods := &objectLister{objects: map[schema.GroupResource]map[string]map[string]labels.Set{
		{Resource: "pods"}: {"default": {"web-0": {"app": "web"}, "web-1": {"app": "web"}, "db-0": {"app": "db"}}},
	}}
	p, err := NewFromOptions("prom", o, providers.Deps{Mapper: mapper, Resources: naming.NewResolver(mapper, nil), Objects: pods})
	if err != nil {
		t.Fatal(err)
	}

	// until Prometheus is up and has scraped the target
	for {
		err := p.Relist(ctx)
		if err == nil && len(p.ListAllExternalMetrics()) == 2 && len(p.ListAllMetrics()) == 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no series from Prometheus: %v (custom %v, external %v)", err, p.ListAllMetrics(), p.ListAllExternalMetrics())
		}
		time.Sleep(300 * time.Millisecond)
	}

	qctx, qcancel := context.WithTimeout(ctx, 10*time.Second)
	defer qcancel()
	ext, err := p.GetExternalMetric(qctx, "default", labels.Everything(), providers.ExternalMetricInfo{Metric: "queue_messages_ready"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, it := range ext.Items {
		got[it.MetricLabels["queue"]] = it.Value.MilliValue()
	}
	if len(got) != 2 || got["jobs"] != 240000 || got["mail"] != 3500 {
		t.Errorf("external: %v", got)
	}

	info := providers.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: "inflight_requests"}
	list, err := p.GetMetricBySelector(qctx, "default", mustSelector(t, "app=web"), info, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var items []string
	for _, it := range list.Items {
		items = append(items, fmt.Sprintf("%s=%s", it.DescribedObject.Name, it.Value.String()))
	}
	if strings.Join(items, " ") != "web-0=4 web-1=7" {
		t.Errorf("custom by selector: %v", items)
	}
	mv, err := p.GetMetricByName(qctx, types.NamespacedName{Namespace: "default", Name: "web-1"}, info, mustSelector(t, "path=x"))
	if err != nil || mv.Value.Value() != 1 {
		t.Errorf("custom by name with a metric selector: %+v, %v", mv, err)
	}

	_, err = p.GetExternalMetric(qctx, "default", labels.Everything(), providers.ExternalMetricInfo{Metric: "broken_query"})
	if code(err) != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "parse error") {
		t.Errorf("PromQL error from Prometheus: %v", err)
	}
}

// startPrometheus runs Debian's Prometheus on a free loopback port,
// scraping target every second, until the test ends; it returns its URL.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	return providertest.StartPrometheus(t, fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n- job_name: test\n  static_configs: [{targets: [%q]}]\n",
		strings.TrimPrefix(target, "http://")), nil)
}

// TestRealPrometheusFeed: with the change feed on (a hub with a
// subscriber), the External query an autoscaler made is asked again every
// feedPollInterval (1s) against a real Prometheus, and each change of the
// scraped value is published for the queried series, even with a query
// cache (5s) longer than the interval. It logs scrape target change →
// change on the feed (Prometheus' 1s scrape plus the poll), and checks the
// poll costs about one PromQL query per interval.
func TestRealPrometheusFeed(t *testing.T) {
	providertest.NeedPrometheus(t)
	t.Parallel()
	var depth atomic.Int64
	depth.Store(10)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# TYPE queue_messages_ready gauge\nqueue_messages_ready{namespace=\"default\",queue=\"jobs\"} %d\nqueue_messages_ready{namespace=\"default\",queue=\"mail\"} 1\n", depth.Load())
	}))
	defer target.Close()
	url := startPrometheus(t, target.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	rulesYAML := `
externalRules:
- seriesQuery: '{__name__="queue_messages_ready"}'
  resources: {overrides: {namespace: {resource: namespace}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
`
	o, err := OptionsFromAdapterConfig([]byte(rulesYAML), AdapterFlags{PrometheusURL: url, MetricsRelistInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	o.QueryCacheTTL = &metav1.Duration{Duration: 5 * time.Second}
	hub := providertest.NewTimedHub()
	mapper := testMapper()
	p, err := NewFromOptions("prom-feed", o, providers.Deps{Mapper: mapper, Resources: naming.NewResolver(mapper, nil), Changes: hub})
	if err != nil {
		t.Fatal(err)
	}
	for {
		err := p.Relist(ctx)
		if err == nil && len(p.ListAllExternalMetrics()) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no series from Prometheus: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	go p.Run(ctx)
	// The autoscaler's query: it is polled from now on.
	sel := labels.SelectorFromSet(labels.Set{"queue": "jobs"})
	info := providers.ExternalMetricInfo{Metric: "queue_messages_ready"}
	if _, err := p.GetExternalMetric(ctx, "default", sel, info); err != nil {
		t.Fatal(err)
	}

	before, began := p.PromQLCalls(), time.Now()
	const trials = 10
	var lat []time.Duration
	for i := range trials {
		time.Sleep(rand.N(1500 * time.Millisecond))
		hub.Drain()
		start := time.Now()
		depth.Add(int64(5 + i))
		select {
		case c := <-hub.C:
			if c.Metric != info.Metric || c.Namespace != "default" || c.All || c.Labels["queue"] != "jobs" {
				t.Fatalf("trial %d: published %+v, want queue_messages_ready{queue=jobs} in default", i, c.Change)
			}
			lat = append(lat, c.At.Sub(start))
		case <-time.After(30 * time.Second):
			t.Fatalf("trial %d: the change was not published", i)
		}
		// The served value is the new one (the poll refreshed the cache).
		list, err := p.GetExternalMetric(ctx, "default", sel, info)
		if err != nil || len(list.Items) != 1 || list.Items[0].Value.Value() != depth.Load() {
			t.Fatalf("trial %d: after the change, served %v (%v), want %d", i, list, err, depth.Load())
		}
	}
	elapsed := time.Since(began)
	calls := p.PromQLCalls() - before
	slices.Sort(lat)
	t.Logf("scraped value changed → change on the feed over %d trials (scrape 1s, feedPollInterval 1s, queryCacheTTL 5s): p50 %s, max %s; %d PromQL queries in %s (%.2f/s)",
		trials, lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), calls, elapsed.Round(time.Millisecond), float64(calls)/elapsed.Seconds())
	// One query per interval (the poll's), the one tick in flight, and the
	// test's own reads, which the cache mostly serves.
	if limit := int64(elapsed/time.Second) + 2 + trials; calls > limit {
		t.Errorf("%d PromQL queries in %s, want at most one per interval plus the test's reads (%d)", calls, elapsed.Round(time.Millisecond), limit)
	}
}
