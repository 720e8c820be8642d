package prometheus

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	pmodel "github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/prometheus/rules"
)

var (
	podsGR  = schema.GroupResource{Resource: "pods"}
	nodesGR = schema.GroupResource{Resource: "nodes"}
)

// namespaceParallelism bounds the namespaces queried at once for pods.
const namespaceParallelism = 8

// samplesByObject maps an object name to its result samples.
type samplesByObject map[string][]*pmodel.Sample

// resourceQuery runs one resource rule's container (pods) or node query, as
// prometheus-adapter's resourceprovider does: pods grouped by the container
// label too; NaN and negative values are 0.
func (p *Provider) resourceQuery(ctx context.Context, rq *rules.ResourceQuery, gr schema.GroupResource, ns string, names []string) (samplesByObject, error) {
	var (
		q   string
		err error
	)
	tmpl := rq.Node
	if gr == podsGR {
		tmpl = rq.Container
		q, err = tmpl.Build("", gr, ns, []string{rq.ContainerLabel}, labels.Everything(), names...)
	} else {
		q, err = tmpl.Build("", gr, ns, nil, labels.Everything(), names...)
	}
	if err != nil {
		return nil, providers.NewBackendError(p.name, fmt.Errorf("%s: rendering the query: %w", rq.Field, err))
	}
	v, err := p.run(ctx, rq.Field, q)
	if err != nil {
		return nil, err
	}
	vec, ok := v.(pmodel.Vector)
	if !ok {
		return nil, providers.NewBackendError(p.name, fmt.Errorf("%s: unexpected result type %s (want a vector)", rq.Field, v.Type()))
	}
	label, err := tmpl.Converter().LabelForResource(gr)
	if err != nil {
		return nil, providers.NewBackendError(p.name, fmt.Errorf("%s: %w", rq.Field, err))
	}
	out := make(samplesByObject, len(vec))
	for _, s := range vec {
		if s == nil {
			continue
		}
		k := string(s.Metric[pmodel.LabelName(label)])
		out[k] = append(out[k], s)
	}
	return out, nil
}

// usageValue is a sample's value with NaN and negative values as 0; the
// sample itself may be shared through the result cache, so it is not changed.
func usageValue(s *pmodel.Sample) float64 {
	v := float64(s.Value)
	if math.IsNaN(v) || v < 0 {
		return 0
	}
	return v
}

// both runs the CPU and memory queries concurrently.
func (p *Provider) both(ctx context.Context, gr schema.GroupResource, ns string, names []string) (cpu, mem samplesByObject, err error) {
	var cpuErr, memErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		cpu, cpuErr = p.resourceQuery(ctx, p.set.Resource.CPU, gr, ns, names)
	}()
	go func() {
		defer wg.Done()
		mem, memErr = p.resourceQuery(ctx, p.set.Resource.Memory, gr, ns, names)
	}()
	wg.Wait()
	if err := errors.Join(cpuErr, memErr); err != nil {
		return nil, nil, err
	}
	return cpu, mem, nil
}

func (p *Provider) noResourceRules(gr schema.GroupResource) error {
	return providers.NewUnknownMetric(gr, "cpu")
}

// GetPodMetrics implements providers.ResourceProvider: one query per
// namespace for CPU and one for memory. A pod needs both to be reported; a
// container with only one gets 0 for the other. A namespace whose queries
// fail is left out (an error only when all fail).
func (p *Provider) GetPodMetrics(ctx context.Context, pods []types.NamespacedName) ([]providers.PodUsage, error) {
	if p.set.Resource == nil {
		return nil, p.noResourceRules(podsGR)
	}
	byNS := map[string][]string{}
	for _, pod := range pods {
		byNS[pod.Namespace] = append(byNS[pod.Namespace], pod.Name)
	}
	type nsResult struct {
		cpu, mem samplesByObject
		err      error
	}
	results := make(map[string]*nsResult, len(byNS))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, namespaceParallelism)
	for ns, names := range byNS {
		sort.Strings(names)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			cpu, mem, err := p.both(ctx, podsGR, ns, names)
			mu.Lock()
			results[ns] = &nsResult{cpu: cpu, mem: mem, err: err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	var firstErr error
	failed := 0
	for ns, r := range results {
		if r.err != nil {
			failed++
			firstErr = r.err
			klog.ErrorS(r.err, "Unable to fetch resource metrics of pods, leaving them out", "provider", p.name, "namespace", ns)
		}
	}
	if len(results) > 0 && failed == len(results) {
		return nil, firstErr
	}
	window := p.set.Resource.Window
	out := make([]providers.PodUsage, 0, len(pods))
	for _, pod := range pods {
		r := results[pod.Namespace]
		if r == nil || r.err != nil {
			continue
		}
		cpu, okC := r.cpu[pod.Name]
		mem, okM := r.mem[pod.Name]
		if !okC || !okM {
			klog.V(4).InfoS("Missing CPU or memory of a pod, leaving it out", "provider", p.name, "pod", pod)
			continue
		}
		out = append(out, podUsage(pod, cpu, mem, p.set.Resource.CPU.ContainerLabel, p.set.Resource.Memory.ContainerLabel, window))
	}
	return out, nil
}

func podUsage(pod types.NamespacedName, cpu, mem []*pmodel.Sample, cpuLabel, memLabel string, window time.Duration) providers.PodUsage {
	type usage struct {
		cpu, mem       resource.Quantity
		hasCPU, hasMem bool
	}
	containers := map[string]*usage{}
	earliest := pmodel.Latest
	get := func(name string) *usage {
		u := containers[name]
		if u == nil {
			u = &usage{}
			containers[name] = u
		}
		return u
	}
	for _, s := range cpu {
		u := get(string(s.Metric[pmodel.LabelName(cpuLabel)]))
		u.cpu, u.hasCPU = milli(usageValue(s), resource.DecimalSI), true
		earliest = min(earliest, s.Timestamp)
	}
	for _, s := range mem {
		u := get(string(s.Metric[pmodel.LabelName(memLabel)]))
		u.mem, u.hasMem = milli(usageValue(s), resource.BinarySI), true
		earliest = min(earliest, s.Timestamp)
	}
	pu := providers.PodUsage{Pod: pod, Timestamp: earliest.Time(), Window: window}
	for name, u := range containers {
		if !u.hasCPU {
			u.cpu = *resource.NewMilliQuantity(0, resource.BinarySI)
		}
		if !u.hasMem {
			u.mem = *resource.NewMilliQuantity(0, resource.BinarySI)
		}
		pu.Containers = append(pu.Containers, providers.ContainerUsage{Name: name, CPU: u.cpu, Memory: u.mem})
	}
	sort.Slice(pu.Containers, func(i, j int) bool { return pu.Containers[i].Name < pu.Containers[j].Name })
	return pu
}

// GetNodeMetrics implements providers.ResourceProvider: one query each for
// CPU and memory; a node needs both; the first sample of each is used.
func (p *Provider) GetNodeMetrics(ctx context.Context, nodes []string) ([]providers.NodeUsage, error) {
	if p.set.Resource == nil {
		return nil, p.noResourceRules(nodesGR)
	}
	if len(nodes) == 0 {
		return nil, nil
	}
	names := append([]string(nil), nodes...)
	sort.Strings(names)
	cpu, mem, err := p.both(ctx, nodesGR, "", names)
	if err != nil {
		return nil, err
	}
	out := make([]providers.NodeUsage, 0, len(nodes))
	for _, n := range nodes {
		c, okC := cpu[n]
		m, okM := mem[n]
		if !okC || !okM {
			klog.V(4).InfoS("Missing CPU or memory of a node, leaving it out", "provider", p.name, "node", n)
			continue
		}
		ts := min(c[0].Timestamp, m[0].Timestamp)
		out = append(out, providers.NodeUsage{
			Node: n, Timestamp: ts.Time(), Window: p.set.Resource.Window,
			CPU:    milli(usageValue(c[0]), resource.DecimalSI),
			Memory: milli(usageValue(m[0]), resource.BinarySI),
		})
	}
	return out, nil
}
