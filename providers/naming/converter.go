package naming

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"text/template"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
)

// GroupResource is a resource as written in a rules file: the group may be
// empty and the resource singular or plural.
type GroupResource struct {
	Group    string `json:"group,omitempty"`
	Resource string `json:"resource"`
}

// ResourceMapping is prometheus-adapter's `resources:` block: how series
// labels name Kubernetes objects.
type ResourceMapping struct {
	// Template turns a resource into a label name; it sees .Group (dots and
	// dashes replaced by underscores) and .Resource (singular), with <<
	// and >> as delimiters: "kube_<<.Group>>_<<.Resource>>".
	Template string `json:"template,omitempty"`
	// Overrides map label names to resources, before the template.
	Overrides map[string]GroupResource `json:"overrides,omitempty"`
	// Namespaced (external rules only, default true) scopes queries to the
	// request's namespace through the label of the namespaces resource.
	Namespaced *bool `json:"namespaced,omitempty"`
}

// IsNamespaced is Namespaced with its default (true).
func (m ResourceMapping) IsNamespaced() bool { return m.Namespaced == nil || *m.Namespaced }

// groupSanitizer makes a group usable in a label name, as prometheus-adapter
// does ("networking.k8s.io" → "networking_k8s_io").
var groupSanitizer = strings.NewReplacer(".", "_", "-", "_")

// Converter maps label names to resources and back, with prometheus-adapter's
// semantics (pkg/naming/resource_converter.go): overrides first, then the
// template; label → resource through a regular expression derived from the
// template, normalized through the Resolver. It is safe for concurrent use.
type Converter struct {
	tmpl      *template.Template
	extract   *regexp.Regexp
	resIndex  int
	grpIndex  int // -1 without <<.Group>>
	overrides map[string]GroupResource
	resolver  *Resolver

	mu         sync.RWMutex
	bound      bool // every override resolved
	labelToRes map[string]*Resource
	resToLabel map[schema.GroupResource]string
}

// NewConverter compiles m. resolver may be nil to only validate m; such a
// Converter answers nothing.
func NewConverter(m ResourceMapping, resolver *Resolver) (*Converter, error) {
	c := &Converter{
		grpIndex:   -1,
		overrides:  m.Overrides,
		resolver:   resolver,
		labelToRes: map[string]*Resource{},
		resToLabel: map[schema.GroupResource]string{},
	}
	for lbl, gr := range m.Overrides {
		if lbl == "" {
			return nil, errors.New("overrides: empty label name")
		}
		if gr.Resource == "" {
			return nil, fmt.Errorf("overrides[%s].resource: must not be empty", lbl)
		}
	}
	if m.Template == "" {
		return c, nil
	}
	tmpl, err := template.New("resource-label").Delims("<<", ">>").Parse(m.Template)
	if err != nil {
		return nil, fmt.Errorf("template: unable to parse label template %q: %w", m.Template, err)
	}
	// The label → resource direction runs the template over capture groups,
	// as prometheus-adapter does (pkg/naming/lbl_res.go).
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, schema.GroupResource{Group: "(?P<group>.+?)", Resource: "(?P<resource>.+?)"}); err != nil {
		return nil, fmt.Errorf("template: unable to convert label template %q to a matcher: %w", m.Template, err)
	}
	if buf.Len() == 0 {
		return nil, fmt.Errorf("template: label template %q produces an empty label", m.Template)
	}
	re, err := regexp.Compile("^" + buf.String() + "$")
	if err != nil {
		return nil, fmt.Errorf("template: unable to convert label template %q to a matcher: %w", m.Template, err)
	}
	c.resIndex = -1
	for i, name := range re.SubexpNames() {
		switch name {
		case "group":
			c.grpIndex = i
		case "resource":
			c.resIndex = i
		}
	}
	if c.resIndex < 0 {
		return nil, fmt.Errorf("template: label template %q must include <<.Resource>>", m.Template)
	}
	c.tmpl, c.extract = tmpl, re
	return c, nil
}

// HasTemplate tells whether the mapping has a template.
func (c *Converter) HasTemplate() bool { return c.tmpl != nil }

// HasMapping tells whether any label can map to a resource.
func (c *Converter) HasMapping() bool { return c.tmpl != nil || len(c.overrides) > 0 }

// MayMapNamespaces tells, without a RESTMapper, whether some label can name
// the namespaces resource: a template, or an override to namespace(s).
func (c *Converter) MayMapNamespaces() bool {
	if c.tmpl != nil {
		return true
	}
	for _, gr := range c.overrides {
		if gr.Group == "" || gr.Group == "core" {
			switch gr.Resource {
			case "namespace", "namespaces", "ns":
				return true
			}
		}
	}
	return false
}

// bind resolves the overrides. An override the cluster does not serve (yet:
// a CRD may come later) is skipped and retried on the next call, where
// prometheus-adapter refuses to start.
func (c *Converter) bind() {
	c.mu.RLock()
	bound := c.bound
	c.mu.RUnlock()
	if bound || c.resolver == nil {
		return
	}
	all := true
	resolved := make(map[string]*Resource, len(c.overrides))
	for lbl, gr := range c.overrides {
		res, err := c.resolver.Resolve(schema.GroupResource{Group: gr.Group, Resource: gr.Resource})
		if err != nil {
			all = false
			klog.V(2).InfoS("Skipping a resource override the cluster does not serve", "label", lbl, "group", gr.Group, "resource", gr.Resource, "err", err)
			continue
		}
		resolved[lbl] = res
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for lbl, res := range resolved {
		c.labelToRes[lbl] = res
		c.resToLabel[res.GR] = lbl
	}
	c.bound = all
}

// LabelForResource returns the label that names objects of gr: its override,
// else the template applied to the sanitized group and singular resource.
func (c *Converter) LabelForResource(gr schema.GroupResource) (string, error) {
	if c.resolver == nil {
		return "", fmt.Errorf("unable to convert resource %s into a label: no resolver", gr)
	}
	c.bind()
	c.mu.RLock()
	lbl, ok := c.resToLabel[gr]
	c.mu.RUnlock()
	if ok {
		return lbl, nil
	}
	res, err := c.resolver.Resolve(gr)
	if err != nil {
		return "", fmt.Errorf("unable to convert resource %s into a label: %w", gr, err)
	}
	if res.GR != gr {
		c.mu.RLock()
		lbl, ok = c.resToLabel[res.GR]
		c.mu.RUnlock()
		if ok {
			return lbl, nil
		}
	}
	if c.tmpl == nil {
		return "", fmt.Errorf("unable to convert resource %s into a label: no override for it and no template", res.GR)
	}
	var buf bytes.Buffer
	if err := c.tmpl.Execute(&buf, schema.GroupResource{Group: groupSanitizer.Replace(res.GR.Group), Resource: res.Singular}); err != nil {
		return "", fmt.Errorf("unable to convert resource %s into a label: %w", res.GR, err)
	}
	if buf.Len() == 0 {
		return "", fmt.Errorf("unable to convert resource %s into a label: the template produced an empty label", res.GR)
	}
	lbl = buf.String()
	c.mu.Lock()
	c.resToLabel[res.GR] = lbl
	c.resToLabel[gr] = lbl
	c.mu.Unlock()
	return lbl, nil
}

// ResourceForLabel returns the resource a label names, if any: its override,
// else the template's match normalized through the Resolver. Labels that
// match the template but name no served resource ("instance") are not.
func (c *Converter) ResourceForLabel(label string) (*Resource, bool) {
	if c.resolver == nil {
		return nil, false
	}
	c.bind()
	c.mu.RLock()
	res, ok := c.labelToRes[label]
	c.mu.RUnlock()
	if ok {
		return res, true
	}
	if _, isOverride := c.overrides[label]; isOverride || c.extract == nil {
		return nil, false
	}
	m := c.extract.FindStringSubmatch(label)
	if m == nil {
		return nil, false
	}
	gr := schema.GroupResource{Resource: m[c.resIndex]}
	if c.grpIndex >= 0 {
		gr.Group = m[c.grpIndex]
	}
	res, err := c.resolver.Resolve(gr)
	if err != nil {
		// common (every label matches "<<.Resource>>"): the Resolver caches it
		klog.V(9).InfoS("Label names no resource", "label", label, "groupResource", gr, "err", err)
		return nil, false
	}
	c.mu.Lock()
	c.labelToRes[label] = res
	c.mu.Unlock()
	return res, true
}
