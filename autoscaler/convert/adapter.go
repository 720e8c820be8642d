package convert

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// AdapterConfig is the part of the adapter's --config (adapter/config)
// that serves converted metrics: providers and the routes to them. It is
// written with its own types, not adapter/config's, so that the autoscaler
// does not link every broker client; a unit test loads what it writes
// through the adapter's own validation.
type AdapterConfig struct {
	Providers []AdapterProvider `json:"providers"`
	Routes    []AdapterRoute    `json:"routes,omitempty"`
}

// AdapterProvider is one providers[] entry.
type AdapterProvider struct {
	Name    string         `json:"name"`
	Type    string         `json:"type"`
	Options map[string]any `json:"options,omitempty"`
}

// AdapterRoute is one routes[] entry.
type AdapterRoute struct {
	Metric   string `json:"metric"`
	Provider string `json:"provider"`
	Kind     string `json:"kind,omitempty"`
}

// adapterBuilder collects the providers converted triggers need: triggers
// that reach the same server the same way share one provider.
type adapterBuilder struct {
	providers []*builtProvider
	byKey     map[string]*builtProvider
	routes    []AdapterRoute
	credDir   string
}

type builtProvider struct {
	AdapterProvider
	key string
	// listKey is the option holding the metric entries ("metrics" unless
	// the provider type names it otherwise).
	listKey string
	entries []any
}

func newAdapterBuilder(credDir string) *adapterBuilder {
	if credDir == "" {
		credDir = DefaultCredentialsDir
	}
	return &adapterBuilder{byKey: map[string]*builtProvider{}, credDir: strings.TrimRight(credDir, "/")}
}

// DefaultCredentialsDir is where placeholder credential files point:
// DIR/<provider>/<file>, a Secret mounted into the adapter.
const DefaultCredentialsDir = "/etc/metricscale/secrets"

// provider returns the provider of type typ with the connection options
// conn, creating it (named keda-<type>, -2, -3, ...) on first use; its
// metric entries go under the option listKey ("metrics" when empty).
//
// credentials names where its credentials come from when that is known
// before the provider is ("file:/path", "env:NAME"): triggers reading a
// different Secret get a provider of their own.
func (b *adapterBuilder) provider(typ, listKey string, conn map[string]any, credentials string) *builtProvider {
	enc, _ := json.Marshal(conn) // maps marshal with sorted keys
	key := typ + "\x00" + string(enc) + "\x00" + credentials
	if p, ok := b.byKey[key]; ok {
		return p
	}
	name := "keda-" + typ
	for n := 2; b.nameTaken(name); n++ {
		name = fmt.Sprintf("keda-%s-%d", typ, n)
	}
	if listKey == "" {
		listKey = "metrics"
	}
	p := &builtProvider{AdapterProvider: AdapterProvider{Name: name, Type: typ, Options: conn}, key: key, listKey: listKey}
	b.providers = append(b.providers, p)
	b.byKey[key] = p
	return p
}

func (b *adapterBuilder) nameTaken(name string) bool {
	return slices.ContainsFunc(b.providers, func(p *builtProvider) bool { return p.Name == name })
}

// credential is the placeholder file a provider's secret is to be mounted
// at.
func (b *adapterBuilder) credential(p *builtProvider, file string) string {
	return b.credDir + "/" + p.Name + "/" + file
}

// add serves metric from p with entry (a metric entry or external rule).
func (b *adapterBuilder) add(p *builtProvider, metric string, entry any) {
	p.entries = append(p.entries, entry)
	b.routes = append(b.routes, AdapterRoute{Metric: metric, Provider: p.Name, Kind: "external"})
}

// config is what was built; empty when no trigger needed the adapter.
func (b *adapterBuilder) config() *AdapterConfig {
	if len(b.providers) == 0 {
		return nil
	}
	c := &AdapterConfig{Routes: b.routes}
	for _, p := range b.providers {
		opts := map[string]any{}
		for k, v := range p.Options {
			opts[k] = v
		}
		opts[p.listKey] = p.entries
		c.Providers = append(c.Providers, AdapterProvider{Name: p.Name, Type: p.Type, Options: opts})
	}
	return c
}

// MergeAdapterConfig adds c's providers and routes to base, an adapter
// config file's content (empty: the adapter's default, one memory provider
// named "memory" serving every metric). Converted routes name exact metrics
// and go first, since the first matching route wins; a provider whose name
// base already uses is renamed. The rest of base is kept as it is.
func MergeAdapterConfig(base []byte, c *AdapterConfig) ([]byte, error) {
	doc := map[string]any{}
	if len(strings.TrimSpace(string(base))) == 0 {
		doc["providers"] = []any{map[string]any{"name": "memory", "type": "memory"}}
	} else if err := yaml.Unmarshal(base, &doc); err != nil {
		return nil, fmt.Errorf("the base adapter config: %w", err)
	}
	provs, ok := doc["providers"].([]any)
	if !ok || len(provs) == 0 {
		return nil, fmt.Errorf("the base adapter config: providers: want a non-empty list")
	}
	routes, _ := doc["routes"].([]any)
	if doc["routes"] != nil && routes == nil {
		return nil, fmt.Errorf("the base adapter config: routes: want a list")
	}
	taken := map[string]bool{}
	for _, p := range provs {
		if m, ok := p.(map[string]any); ok {
			name, _ := m["name"].(string)
			taken[name] = true
		}
	}
	if len(routes) == 0 && len(provs) == 1 {
		// the implicit route of a single provider, made explicit: with more
		// providers the adapter needs routes
		name, _ := provs[0].(map[string]any)["name"].(string)
		routes = []any{map[string]any{"metric": "*", "provider": name}}
	}
	if c == nil {
		c = &AdapterConfig{}
	}
	rename := map[string]string{}
	var newProvs, newRoutes []any
	for _, p := range c.Providers {
		name := p.Name
		for n := 2; taken[name]; n++ {
			name = fmt.Sprintf("%s-%d", p.Name, n)
		}
		taken[name] = true
		rename[p.Name] = name
		p.Name = name
		m, err := toGeneric(p)
		if err != nil {
			return nil, err
		}
		newProvs = append(newProvs, m)
	}
	for _, r := range c.Routes {
		r.Provider = rename[r.Provider]
		m, err := toGeneric(r)
		if err != nil {
			return nil, err
		}
		newRoutes = append(newRoutes, m)
	}
	doc["providers"] = append(provs, newProvs...)
	doc["routes"] = append(newRoutes, routes...)
	return yaml.Marshal(doc)
}

func toGeneric(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(b, &out)
}
