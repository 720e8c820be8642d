package prometheus

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/naming"
)

// newValuesProvider is newTestProvider with global_lag's external rule
// marked allowNegative and queryCacheTTL as given.
func newValuesProvider(t *testing.T, f *fakeProm, cached bool, objs *objectLister) *Provider {
	t.Helper()
	o := mustOptions(t, f.srv.URL)
	o.ExternalRules[1].AllowNegative = true
	if cached {
		o.QueryCacheTTL = &metav1.Duration{Duration: time.Minute}
	}
	mapper := testMapper()
	p, err := NewFromOptions("prom", o, providers.Deps{Mapper: mapper, Resources: naming.NewResolver(mapper, nil), Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestValuesChecked: what Prometheus answers reaches a reader only if it
// may: never NaN or ±Inf (prometheus-adapter serves NaN as
// -9223372036854775808m on amd64, which an HPA reads as no load), and a
// negative external value only from a rule with allowNegative. Custom
// metrics serve negative values, as prometheus-adapter does.
func TestValuesChecked(t *testing.T) {
	t.Parallel()
	type read func(p *Provider) (string, error)
	byName := func(p *Provider) (string, error) {
		mv, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "default", Name: "web-1"}, podsInfo, labels.Everything())
		if err != nil {
			return "", err
		}
		return mv.Value.String(), nil
	}
	bySelector := func(p *Provider) (string, error) {
		l, err := p.GetMetricBySelector(context.Background(), "default", mustSelector(t, "app=web"), podsInfo, labels.Everything())
		if err != nil {
			return "", err
		}
		var s []string
		for _, it := range l.Items {
			s = append(s, it.DescribedObject.Name+"="+it.Value.String())
		}
		return strings.Join(s, " "), nil
	}
	external := func(metric, sel string) read {
		return func(p *Provider) (string, error) {
			l, err := p.GetExternalMetric(context.Background(), "default", mustSelector(t, sel), providers.ExternalMetricInfo{Metric: metric})
			if err != nil {
				return "", err
			}
			var s []string
			for _, it := range l.Items {
				s = append(s, it.MetricLabels["queue"]+"="+it.Value.String())
			}
			return strings.Join(s, " "), nil
		}
	}
	queues := func(jobs, mail string) []sample {
		return []sample{{map[string]string{"queue": "jobs"}, jobs}, {map[string]string{"queue": "mail"}, mail}}
	}
	pods := func(v1 string) []sample {
		return []sample{{map[string]string{"pod": "web-0"}, "1"}, {map[string]string{"pod": "web-1"}, v1}}
	}
	tests := []struct {
		name    string
		answer  []sample
		read    read
		want    string
		refused string // a substring of the 503, "" when served
	}{
		{"custom NaN", pods("NaN"), byName, "", `series pods default/web-1`},
		{"custom +Inf", pods("+Inf"), byName, "", "+Inf"},
		{"custom -Inf", pods("-Inf"), byName, "", "-Inf"},
		{"custom negative served", pods("-2.5"), byName, "-2500m", ""},
		{"custom selection with a NaN pod", pods("NaN"), bySelector, "", `series pods default/web-1`},
		{"custom selection negative served", pods("-1"), bySelector, "web-0=1 web-1=-1", ""},
		{"external negative refused", queues("-4", "2"), external("queue_messages_ready", ""), "", "series queue=jobs"},
		{"external NaN refused", queues("7", "NaN"), external("queue_messages_ready", ""), "", "series queue=mail"},
		{"external NaN of another queue", queues("7", "NaN"), external("queue_messages_ready", "queue=jobs"), "jobs=7", ""},
		{"external NaN selected", queues("7", "NaN"), external("queue_messages_ready", "queue in (mail,jobs)"), "", "series queue=mail"},
		{"external allowNegative", []sample{{map[string]string{}, "-3"}}, external("global_lag", ""), "=-3", ""},
		{"external allowNegative still refuses NaN", []sample{{map[string]string{}, "NaN"}}, external("global_lag", ""), "", "not finite"},
	}
	for _, cached := range []bool{false, true} {
		for _, tt := range tests {
			name := tt.name
			if cached {
				name += " (queryCacheTTL)"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				f := newFakeProm(t)
				f.addTestSeries()
				f.answer = func(q string) ([]sample, error) {
					if strings.Contains(q, `queue="jobs"`) {
						// the selector as matchers (cache off): only jobs
						return tt.answer[:1], nil
					}
					return tt.answer, nil
				}
				p := newValuesProvider(t, f, cached, podLister(2))
				got, err := tt.read(p)
				if tt.refused == "" {
					if err != nil || got != tt.want {
						t.Fatalf("got %q, %v; want %q served", got, err, tt.want)
					}
					return
				}
				if err == nil {
					t.Fatalf("served %q; want a 503 saying %q", got, tt.refused)
				}
				if code(err) != http.StatusServiceUnavailable || providers.ReasonOf(err) != providers.ReasonBadValue {
					t.Errorf("refusal %v: code %d, reason %s; want 503 %s", err, code(err), providers.ReasonOf(err), providers.ReasonBadValue)
				}
				for _, s := range []string{`"prom"`, tt.refused} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("refusal %q does not say %q", err, s)
					}
				}
			})
		}
	}
}

func TestAllowNegativeOnlyOnExternalRules(t *testing.T) {
	t.Parallel()
	o := mustOptions(t, "http://prometheus:9090")
	o.Rules[0].AllowNegative = true
	_, err := NewFromOptions("prom", o, providers.Deps{Mapper: testMapper()})
	if err == nil || !strings.Contains(err.Error(), "rules[0].allowNegative") {
		t.Fatalf("allowNegative on a custom rule: %v", err)
	}
}
