package prometheus

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/naming"
)

// recordingAnswer answers from a table of queries and records each query.
type recordingAnswer struct {
	mu      sync.Mutex
	table   map[string][]sample
	queries []string
}

func (r *recordingAnswer) answer(q string) ([]sample, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, q)
	return r.table[q], nil
}

func (r *recordingAnswer) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queries
	r.queries = nil
	return q
}

func queueSample(q, v string) sample { return sample{map[string]string{"queue": q}, v} }

// TestExternalSelectorFromWholeMetric: with the cache on, a selector is
// applied to the answer of the whole metric's query when that is equivalent
// to matchers inside the query, and becomes matchers otherwise (as in
// prometheus-adapter); with the cache off, it always becomes matchers.
func TestExternalSelectorFromWholeMetric(t *testing.T) {
	t.Parallel()
	const whole = `sum(queue_messages_ready{namespace="default"}) by (queue)`
	table := map[string][]sample{
		whole: {queueSample("jobs", "240"), queueSample("mail", "3.5"), queueSample("qax", "1")},
		`sum(queue_messages_ready{queue="jobs",namespace="default"}) by (queue)`: {queueSample("jobs", "240")},
		`sum(queue_messages_ready{queue=~"q.x",namespace="default"}) by (queue)`: {queueSample("qax", "1")},
		`sum(queue_messages_ready{region="eu",namespace="default"}) by (queue)`:  {queueSample("jobs", "7")},
		`sum(queue_messages_ready{queue="",namespace="default"}) by (queue)`:     {sample{map[string]string{}, "5"}},
		`max(global_lag{region="eu"})`:                                           {sample{map[string]string{}, "12"}},
		`max(global_lag{})`:                                                      {sample{map[string]string{}, "30"}},
	}
	const cacheOn = `"queryCacheTTL":"1m"`
	for _, tc := range []struct {
		extra, metric, selector string
		want                    string // queue=value items, or "404"
		query                   string // the one PromQL query sent
	}{
		{cacheOn, "queue_messages_ready", "queue=jobs", "jobs=240", whole},
		{cacheOn, "queue_messages_ready", "queue==mail", "mail=3500m", whole},
		{cacheOn, "queue_messages_ready", "queue!=jobs", "mail=3500m qax=1", whole},
		{cacheOn, "queue_messages_ready", "queue in (jobs,mail)", "jobs=240 mail=3500m", whole},
		{cacheOn, "queue_messages_ready", "queue notin (jobs,mail)", "qax=1", whole},
		{cacheOn, "queue_messages_ready", "queue", "jobs=240 mail=3500m qax=1", whole},
		{cacheOn, "queue_messages_ready", "!queue", "404", whole},
		{cacheOn, "queue_messages_ready", "queue=nope", "404", whole},
		{cacheOn, "queue_messages_ready", "queue=jobs,queue!=mail", "jobs=240", whole},
		// a regular expression in PromQL, a value here
		{cacheOn, "queue_messages_ready", "queue in (q.x)", "qax=1", `sum(queue_messages_ready{queue=~"q.x",namespace="default"}) by (queue)`},
		// no answer carries region: the query sums it away
		{cacheOn, "queue_messages_ready", "region=eu", "jobs=7", `sum(queue_messages_ready{region="eu",namespace="default"}) by (queue)`},
		// PromQL's queue="" also matches series without queue
		{cacheOn, "queue_messages_ready", "queue=", "=5", `sum(queue_messages_ready{queue="",namespace="default"}) by (queue)`},
		{cacheOn, "global_lag", "region=eu", "=12", `max(global_lag{region="eu"})`},
		{cacheOn, "global_lag", "", "=30", `max(global_lag{})`},
		// cache off: matchers
		{"", "queue_messages_ready", "queue=jobs", "jobs=240", `sum(queue_messages_ready{queue="jobs",namespace="default"}) by (queue)`},
		{"", "queue_messages_ready", "", "jobs=240 mail=3500m qax=1", whole},
	} {
		rec := &recordingAnswer{table: table}
		f := newFakeProm(t)
		f.addTestSeries()
		f.answer = rec.answer
		p := newTestProvider(t, f, tc.extra, nil)
		list, err := p.GetExternalMetric(context.Background(), "default", mustSelector(t, tc.selector), providers.ExternalMetricInfo{Metric: tc.metric})
		got := "404"
		if err != nil {
			if code(err) != http.StatusNotFound {
				t.Errorf("%s %q: %v", tc.metric, tc.selector, err)
			}
		} else {
			var items []string
			for _, it := range list.Items {
				items = append(items, it.MetricLabels["queue"]+"="+it.Value.String())
			}
			got = strings.Join(items, " ")
		}
		if got != tc.want {
			t.Errorf("{%s} %s %q: items %q, want %q", tc.extra, tc.metric, tc.selector, got, tc.want)
		}
		// a fallback sends only its own query: the whole one tells nothing
		// without the selected label, and is then not asked again
		if qs := rec.take(); len(qs) == 0 || qs[len(qs)-1] != tc.query {
			t.Errorf("{%s} %s %q: queries %q, want the last to be %q", tc.extra, tc.metric, tc.selector, qs, tc.query)
		}
	}
}

// TestWholeMetricSharedWithCache: with the result cache on, every selector
// of a metric is answered from one PromQL query.
func TestWholeMetricSharedWithCache(t *testing.T) {
	t.Parallel()
	rec := &recordingAnswer{table: map[string][]sample{
		`sum(queue_messages_ready{namespace="default"}) by (queue)`: {queueSample("jobs", "240"), queueSample("mail", "3.5")},
	}}
	f := newFakeProm(t)
	f.addTestSeries()
	f.answer = rec.answer
	p := newTestProvider(t, f, `"queryCacheTTL":"1m"`, nil)
	for _, sel := range []string{"queue=jobs", "queue=mail", "", "queue in (jobs,mail)", "queue!=jobs"} {
		if _, err := p.GetExternalMetric(context.Background(), "default", mustSelector(t, sel), queueInfo); err != nil {
			t.Errorf("%q: %v", sel, err)
		}
	}
	if qs := rec.take(); len(qs) != 1 {
		t.Errorf("PromQL queries %q, want one for five selectors", qs)
	}
}

// TestPodsSelectorWholeNamespace: with the cache on, every pod selection
// of a namespace is answered from one query for all its pods.
func TestPodsSelectorWholeNamespace(t *testing.T) {
	t.Parallel()
	const all = `sum(rate(http_requests_total{namespace="default",pod!=""}[2m])) by (pod)`
	rec := &recordingAnswer{table: map[string][]sample{
		all: {{map[string]string{"pod": "web-0"}, "1"}, {map[string]string{"pod": "web-2"}, "2"}, {map[string]string{"pod": "other"}, "3"}},
	}}
	f := newFakeProm(t)
	f.addTestSeries()
	f.answer = rec.answer
	p := newTestProvider(t, f, `"queryCacheTTL":"1m"`, podLister(3))
	for _, tc := range []struct{ selector, want string }{
		{"app=web", "web-0=1 web-2=2"},
		{"app=other", "other=3"},
		{"app in (web,other)", "other=3 web-0=1 web-2=2"},
	} {
		list, err := p.GetMetricBySelector(context.Background(), "default", mustSelector(t, tc.selector), podsInfo, labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range list.Items {
			got = append(got, it.DescribedObject.Name+"="+it.Value.String())
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: items %v, want %s", tc.selector, got, tc.want)
		}
	}
	if qs := rec.take(); len(qs) != 1 || qs[0] != all {
		t.Errorf("queries %q, want one: %s", qs, all)
	}
}

// TestPodsSelectorFallsBackToNames: even with the cache on, a rule whose
// query is not filterable (topk) names the selected pods in the query, as
// prometheus-adapter does.
func TestPodsSelectorFallsBackToNames(t *testing.T) {
	t.Parallel()
	cfg, err := ParseAdapterConfig([]byte(`
rules:
- seriesQuery: '{__name__=~"^http_requests_total$",namespace!="",pod!=""}'
  resources: {template: "<<.Resource>>"}
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  metricsQuery: 'topk(2, sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>))'
`))
	if err != nil {
		t.Fatal(err)
	}
	const byNames = `topk(2, sum(rate(http_requests_total{namespace="default",pod=~"web-0|web-1|web-2"}[2m])) by (pod))`
	rec := &recordingAnswer{table: map[string][]sample{
		byNames: {{map[string]string{"pod": "web-0"}, "1"}, {map[string]string{"pod": "web-1"}, "2"}},
	}}
	f := newFakeProm(t)
	f.addTestSeries()
	f.answer = rec.answer
	raw, err := json.Marshal(Options{URL: f.srv.URL, Config: cfg, QueryCacheTTL: &metav1.Duration{Duration: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	mapper := testMapper()
	pp, err := Factory{}.New("prom", raw, providers.Deps{Mapper: mapper, Resources: naming.NewResolver(mapper, nil), Objects: podLister(3)})
	if err != nil {
		t.Fatal(err)
	}
	p := pp.(*Provider)
	if err := p.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	list, err := p.GetMetricBySelector(context.Background(), "default", mustSelector(t, "app=web"), podsInfo, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range list.Items {
		got = append(got, it.DescribedObject.Name)
	}
	sort.Strings(got)
	if strings.Join(got, " ") != "web-0 web-1" {
		t.Errorf("items %v", got)
	}
	if qs := rec.take(); len(qs) != 1 || qs[0] != byNames {
		t.Errorf("queries %q, want %q", qs, byNames)
	}
}

func TestFilterableRequirement(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sel  string
		want bool
	}{
		{"queue=a", true},
		{"queue!=a", true},
		{"queue in (a,b-c,d_e)", true},
		{"queue notin (a)", true},
		{"queue", true},
		{"!queue", true},
		{"queue=a.b", true}, // rendered queue="a.b": exact
		{"queue in (a.b)", false},
		{"queue notin (a,b.c)", false},
		{"queue=", false},
		{"app.kubernetes.io/name=x", false},
		{"9lives=x", false},
	} {
		reqs, _ := mustSelector(t, tc.sel).Requirements()
		if got := filterableRequirement(&reqs[0]); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.sel, got, tc.want)
		}
	}
}

// TestWholeMetricConcurrentSelectors: concurrent selectors share one
// answer, its lazily built index included (run with -race).
func TestWholeMetricConcurrentSelectors(t *testing.T) {
	t.Parallel()
	var all []sample
	for i := range 200 {
		all = append(all, queueSample(fmt.Sprintf("q-%d", i), strconv.Itoa(i)))
	}
	rec := &recordingAnswer{table: map[string][]sample{`sum(queue_messages_ready{namespace="default"}) by (queue)`: all}}
	f := newFakeProm(t)
	f.addTestSeries()
	f.answer = rec.answer
	p := newTestProvider(t, f, `"queryCacheTTL":"1m"`, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < 200; i += 16 {
				list, err := p.GetExternalMetric(context.Background(), "default", mustSelector(t, fmt.Sprintf("queue=q-%d", i)), queueInfo)
				if err != nil {
					errs <- err
					return
				}
				if len(list.Items) != 1 || list.Items[0].Value.Value() != int64(i) {
					errs <- fmt.Errorf("q-%d: %+v", i, list.Items)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if qs := rec.take(); len(qs) != 1 {
		t.Errorf("%d PromQL queries for 200 selectors, want 1", len(qs))
	}
}
