// Package config reads and validates the adapter's configuration file
// (--config): which providers run and which metrics each one serves.
//
//	providers:
//	- name: mem              # instance name, unique, a DNS label
//	  type: memory           # a registered provider type
//	  timeout: 2s            # per query; default 5s
//	  options:               # type-specific, validated by the type
//	    seriesTTL: 10m
//	    maxAge: 2m
//	routes:                  # first match wins
//	- metric: "queue_*"      # glob (Go path.Match syntax) on the metric name
//	  provider: mem
//	  kind: external         # optional: custom, external; default both
//	discovery:
//	  maxMetrics: 1000       # bound on each discovery list
//
// Without a file the adapter runs Default(): one memory provider serving
// every metric.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/prometheus"
)

// Kinds of metric a route can be limited to.
const (
	KindCustom   = "custom"
	KindExternal = "external"
	KindResource = "resource" // metrics.k8s.io; never implied by a route without kind
)

// Defaults.
const (
	DefaultTimeout    = 5 * time.Second
	MaxTimeout        = 60 * time.Second
	DefaultMaxMetrics = 1000
	MaxMaxMetrics     = 100000
)

// Config is the whole file.
type Config struct {
	Providers []Provider `json:"providers"`
	Routes    []Route    `json:"routes,omitempty"`
	Discovery Discovery  `json:"discovery,omitempty"`
	// SelectorResources are the resources ("pods", "deployments.apps")
	// selector queries may name; the adapter watches only these and its
	// RBAC must grant list and watch on them. Empty: pods and namespaces.
	SelectorResources []string `json:"selectorResources,omitempty"`
}

// Provider is one provider instance.
type Provider struct {
	Name    string          `json:"name"`
	Type    string          `json:"type"`
	Timeout metav1.Duration `json:"timeout,omitempty"`
	Options json.RawMessage `json:"options,omitempty"`
}

// Route sends the metrics whose names match Metric to Provider.
type Route struct {
	Metric   string `json:"metric"`
	Provider string `json:"provider"`
	Kind     string `json:"kind,omitempty"`
}

// Discovery bounds the discovery lists.
type Discovery struct {
	MaxMetrics int `json:"maxMetrics,omitempty"`
}

// Default is the configuration used without --config: one memory provider
// named "memory" serving every metric.
func Default() *Config {
	c := &Config{
		Providers: []Provider{{Name: "memory", Type: "memory"}},
		Routes:    []Route{{Metric: "*", Provider: "memory"}},
	}
	c.setDefaults()
	return c
}

// FromPrometheusAdapter is the config for a prometheus-adapter rules file
// given as --config with prometheus-adapter's flags: one prometheus provider
// named "prometheus" serving every custom and external metric, and
// metrics.k8s.io when the file has resourceRules.
func FromPrometheusAdapter(data []byte, flags prometheus.AdapterFlags) (*Config, error) {
	opts, err := prometheus.OptionsFromAdapterConfig(data, flags)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(opts)
	if err != nil {
		return nil, fmt.Errorf("encoding the prometheus provider's options: %w", err)
	}
	c := &Config{
		Providers: []Provider{{Name: "prometheus", Type: prometheus.Type, Options: raw}},
		Routes:    []Route{{Metric: "*", Provider: "prometheus"}},
	}
	if opts.Config.ResourceRules != nil {
		c.Routes = append(c.Routes, Route{Metric: "*", Provider: "prometheus", Kind: KindResource})
	}
	c.setDefaults()
	return c, nil
}

// Load reads, parses and validates the file at filename. factories are the
// known provider types.
func Load(filename string, factories map[string]providers.Factory) (*Config, error) {
	data, err := os.ReadFile(filename)
	if err != nil {
		return nil, fmt.Errorf("reading config %s: %w", filename, err)
	}
	c, err := Parse(data, factories)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", filename, err)
	}
	return c, nil
}

// Parse parses and validates a config document.
func Parse(data []byte, factories map[string]providers.Factory) (*Config, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty config: it needs at least providers")
	}
	if n := documents(data); n > 1 {
		return nil, fmt.Errorf("parsing: %d YAML documents; the config is one document (a second one would be ignored)", n)
	}
	var generic any
	if err := yaml.Unmarshal(data, &generic); err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	if err := exactKeys("", generic, reflect.TypeOf(Config{})); err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	if err := c.Validate(factories); err != nil {
		return nil, err
	}
	c.setDefaults()
	return &c, nil
}

func (c *Config) setDefaults() {
	for i := range c.Providers {
		if c.Providers[i].Timeout.Duration == 0 {
			c.Providers[i].Timeout.Duration = DefaultTimeout
		}
	}
	if len(c.Routes) == 0 && len(c.Providers) == 1 {
		c.Routes = []Route{{Metric: "*", Provider: c.Providers[0].Name}}
	}
	if c.Discovery.MaxMetrics == 0 {
		c.Discovery.MaxMetrics = DefaultMaxMetrics
	}
}

// Validate checks the config; each problem is reported with the path of the
// field at fault ("providers[1].type: unknown \"foo\"").
func (c *Config) Validate(factories map[string]providers.Factory) error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}

	if len(c.Providers) == 0 {
		fail("providers", "at least one provider is required")
	}
	names := map[string]int{}
	for i, p := range c.Providers {
		f := fmt.Sprintf("providers[%d]", i)
		switch {
		case p.Name == "":
			fail(f+".name", "required")
		default:
			if msgs := validation.IsDNS1123Label(p.Name); len(msgs) > 0 {
				fail(f+".name", "invalid %q: %s", p.Name, strings.Join(msgs, "; "))
			}
			if j, dup := names[p.Name]; dup {
				fail(f+".name", "duplicate %q (also providers[%d].name)", p.Name, j)
			} else {
				names[p.Name] = i
			}
		}
		factory, known := factories[p.Type]
		switch {
		case p.Type == "":
			fail(f+".type", "required (known: %s)", knownTypes(factories))
		case !known:
			fail(f+".type", "unknown %q (known: %s)", p.Type, knownTypes(factories))
		default:
			if err := factory.Validate(f+".options", p.Options); err != nil {
				errs = append(errs, err)
			}
		}
		if d := p.Timeout.Duration; d < 0 || d > MaxTimeout {
			fail(f+".timeout", "%s is out of range (0 < timeout <= %s)", d, MaxTimeout)
		}
	}

	if len(c.Routes) == 0 && len(c.Providers) > 1 {
		fail("routes", "required when there is more than one provider")
	}
	for i, r := range c.Routes {
		f := fmt.Sprintf("routes[%d]", i)
		if r.Metric == "" {
			fail(f+".metric", "required")
		} else if _, err := path.Match(r.Metric, ""); err != nil {
			fail(f+".metric", "invalid pattern %q: %v", r.Metric, err)
		}
		if r.Provider == "" {
			fail(f+".provider", "required")
		} else if _, ok := names[r.Provider]; !ok {
			fail(f+".provider", "unknown provider %q", r.Provider)
		}
		switch r.Kind {
		case "", KindCustom, KindExternal:
		case KindResource:
			if r.Metric != "*" {
				fail(f+".metric", "a resource route serves cpu and memory together: use \"*\", not %q", r.Metric)
			}
		default:
			fail(f+".kind", "unknown %q (known: %s, %s, %s)", r.Kind, KindCustom, KindExternal, KindResource)
		}
	}

	if m := c.Discovery.MaxMetrics; m < 0 || m > MaxMaxMetrics {
		fail("discovery.maxMetrics", "%d is out of range (1..%d)", m, MaxMaxMetrics)
	}
	seenRes := map[string]int{}
	for i, r := range c.SelectorResources {
		if msgs := validation.IsDNS1123Subdomain(r); len(msgs) > 0 {
			fail(fmt.Sprintf("selectorResources[%d]", i), "invalid resource %q (resource or resource.group, as in \"deployments.apps\"): %s", r, strings.Join(msgs, "; "))
		} else if j, dup := seenRes[r]; dup {
			fail(fmt.Sprintf("selectorResources[%d]", i), "duplicate %q (also selectorResources[%d])", r, j)
		}
		seenRes[r] = i
	}
	return errors.Join(errs...)
}

// SelectorGroupResources returns SelectorResources parsed ("deployments.apps"
// is group apps, resource deployments); nil when none are configured.
func (c *Config) SelectorGroupResources() []schema.GroupResource {
	var out []schema.GroupResource
	for _, r := range c.SelectorResources {
		out = append(out, schema.ParseGroupResource(r))
	}
	return out
}

// documents counts the non-empty YAML documents in data.
func documents(data []byte) int {
	n := 0
	for _, doc := range regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`).Split(string(data), -1) {
		for _, line := range strings.Split(doc, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") && t != "..." {
				n++
				break
			}
		}
	}
	return n
}

// exactKeys refuses keys that match a field only case-insensitively
// (encoding/json would take "Providers" for "providers"). It checks the
// config's own structure; provider options are checked by their factory.
func exactKeys(field string, v any, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch val := v.(type) {
	case map[string]any:
		if t.Kind() != reflect.Struct {
			return nil
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				fields[name] = t.Field(i).Type
			}
		}
		keys := make([]string, 0, len(val))
		for k := range val {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				for name := range fields {
					if strings.EqualFold(name, k) {
						return fmt.Errorf("%s%s: unknown key; did you mean %q? (keys are case-sensitive)", prefix(field), k, name)
					}
				}
				continue // UnmarshalStrict names unknown keys
			}
			if ft == reflect.TypeOf(json.RawMessage(nil)) {
				continue
			}
			if err := exactKeys(prefix(field)+k, val[k], ft); err != nil {
				return err
			}
		}
	case []any:
		if t.Kind() != reflect.Slice {
			return nil
		}
		for i, e := range val {
			if err := exactKeys(fmt.Sprintf("%s[%d]", field, i), e, t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

func prefix(field string) string {
	if field == "" {
		return ""
	}
	return field + "."
}

// Warnings lists what is valid but probably not meant: routes that repeat
// or can never match because an earlier route takes every metric they
// would, providers no route reaches, and each provider type's own warnings.
func (c *Config) Warnings(warners map[string]func(field string, options json.RawMessage) []string) []string {
	var out []string
	reached := map[string]bool{}
	for i, r := range c.Routes {
		f := fmt.Sprintf("routes[%d]", i)
		for j := range i {
			e := c.Routes[j]
			sameKind := e.Kind == r.Kind || (e.Kind == "" && r.Kind != KindResource)
			if !sameKind {
				continue
			}
			if e.Metric == r.Metric && e.Kind == r.Kind {
				out = append(out, fmt.Sprintf("%s: duplicates routes[%d] (metric %q); it never matches", f, j, r.Metric))
				break
			}
			if e.Metric == "*" {
				out = append(out, fmt.Sprintf("%s: unreachable: routes[%d] (metric \"*\") already takes every metric it would", f, j))
				break
			}
		}
		reached[r.Provider] = true
	}
	for i, p := range c.Providers {
		if !reached[p.Name] {
			out = append(out, fmt.Sprintf("providers[%d] (%s): no route reaches it; it serves nothing", i, p.Name))
		}
		if w := warners[p.Type]; w != nil {
			out = append(out, w(fmt.Sprintf("providers[%d].options", i), p.Options)...)
		}
	}
	return out
}

func knownTypes(factories map[string]providers.Factory) string {
	names := make([]string, 0, len(factories))
	for n := range factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
