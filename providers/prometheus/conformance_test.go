package prometheus

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/prometheus/rules"
	"github.com/metricscale/metricscale/providers/providertest"
)

// conformanceRules serve the suite's metrics as prometheus-adapter users
// write rules: pods by their namespace and pod labels, external series
// scoped to their namespace label.
var conformanceRules = `
rules:
- seriesQuery: '{__name__=~"^` + providertest.CustomPrefix + `.*",namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  metricsQuery: '<<.Series>>{<<.LabelMatchers>>}'
externalRules:
- seriesQuery: '{__name__=~"^` + providertest.ExternalPrefix + `.*"}'
  resources:
    overrides:
      namespace: {resource: namespace}
  metricsQuery: '<<.Series>>{<<.LabelMatchers>>}'
`

// lookback is the fake Prometheus' lookback window: an instant query
// answers nothing for a series with no sample this recent.
const lookback = 5 * time.Minute

// TestConformance runs the provider conformance suite against the fake
// Prometheus, which evaluates the rules' plain vector selectors over the
// suite's data.
func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T, deps providers.Deps, data providertest.Data) providertest.Backend {
			f := newFakeProm(t)
			var hung atomic.Bool
			release := make(chan struct{})
			var once sync.Once
			// runs before the fake's Close, which waits for hung requests
			t.Cleanup(func() { once.Do(func() { close(release) }) })
			cfg, err := ParseAdapterConfig([]byte(conformanceRules))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range append(append([]rules.DiscoveryRule(nil), cfg.Rules...), cfg.ExternalRules...) {
				q := r.SeriesQuery
				sel, err := parseVectorSelector(q)
				if err != nil {
					t.Fatalf("series query %s: %v", q, err)
				}
				f.series[q] = []map[string]string{}
				for _, s := range data.Series {
					// a relist looks back over the max age (the relist interval)
					if l := promLabels(s); sel.matches(l) {
						f.series[q] = append(f.series[q], l)
					}
				}
			}
			f.answer = func(q string) ([]sample, error) {
				if hung.Load() {
					<-release
				}
				sel, err := parseVectorSelector(q)
				if err != nil {
					return nil, &promError{code: 400, errorType: "bad_data", msg: err.Error()}
				}
				var out []sample
				for _, s := range data.Series {
					if l := promLabels(s); s.Age <= lookback && sel.matches(l) {
						out = append(out, sample{labels: l, value: strconv.FormatFloat(s.Value, 'g', -1, 64)})
					}
				}
				return out, nil
			}
			raw, err := json.Marshal(Options{URL: f.srv.URL, Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			p, err := Factory{}.New("prom", raw, deps)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.(*Provider).Relist(context.Background()); err != nil {
				t.Fatal(err)
			}
			return providertest.Backend{Provider: p, Hang: func() { hung.Store(true) }}
		},
		Custom:   true,
		External: true,
		MaxAge:   lookback,
		// Prometheus has no max age for values: an old series falls out of
		// the lookback window and the query answers nothing
		Stale: false,
		// README: > and < cannot be expressed in PromQL and are a 400
		GtLt: providertest.GtLtReject,
	})
}

func promLabels(s providertest.Series) map[string]string {
	l := map[string]string{"__name__": s.Name}
	for k, v := range s.Labels {
		l[k] = v
	}
	return l
}

// matcher is one PromQL label matcher.
type matcher struct {
	label, op string
	re        *regexp.Regexp
	value     string
}

type vectorSelector []matcher

// parseVectorSelector parses a plain PromQL vector selector,
// name{l="v",l!="v",l=~"re",l!~"re"}: all the suite's rules render.
func parseVectorSelector(q string) (vectorSelector, error) {
	q = strings.TrimSpace(q)
	i := strings.IndexByte(q, '{')
	if i < 0 || !strings.HasSuffix(q, "}") {
		return nil, fmt.Errorf("not a vector selector: %s", q)
	}
	var sel vectorSelector
	if name := q[:i]; name != "" {
		sel = append(sel, matcher{label: "__name__", op: "=", value: name})
	}
	rest := q[i+1 : len(q)-1]
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ",")) {
		j := strings.IndexAny(rest, "=!")
		if j <= 0 {
			return nil, fmt.Errorf("bad matcher at %q in %s", rest, q)
		}
		m := matcher{label: strings.TrimSpace(rest[:j])}
		rest = rest[j:]
		for _, op := range []string{"=~", "!~", "!=", "="} {
			if strings.HasPrefix(rest, op) {
				m.op = op
				break
			}
		}
		if m.op == "" {
			return nil, fmt.Errorf("bad operator at %q in %s", rest, q)
		}
		rest = strings.TrimSpace(rest[len(m.op):])
		lit, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return nil, fmt.Errorf("bad value at %q in %s: %v", rest, q, err)
		}
		rest = rest[len(lit):]
		if m.value, err = strconv.Unquote(lit); err != nil {
			return nil, err
		}
		if m.op == "=~" || m.op == "!~" {
			if m.re, err = regexp.Compile("^(?:" + m.value + ")$"); err != nil {
				return nil, err
			}
		}
		sel = append(sel, m)
	}
	return sel, nil
}

// matches applies PromQL semantics: a missing label is the empty string.
func (sel vectorSelector) matches(l map[string]string) bool {
	for _, m := range sel {
		v := l[m.label]
		var ok bool
		switch m.op {
		case "=":
			ok = v == m.value
		case "!=":
			ok = v != m.value
		case "=~":
			ok = m.re.MatchString(v)
		case "!~":
			ok = !m.re.MatchString(v)
		}
		if !ok {
			return false
		}
	}
	return true
}
