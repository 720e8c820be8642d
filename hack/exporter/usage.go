package main

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

const (
	usageCPUAnnotation    = "kwok.x-k8s.io/usage-cpu"
	usageMemoryAnnotation = "kwok.x-k8s.io/usage-memory"
	// kwok manages (and hack/cluster.sh creates) the nodes with this annotation.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeValue      = "fake"
)

// usageTracker turns the kwok usage annotations of the Running pods on kwok nodes into the
// series the kubelet's cAdvisor would serve for them, labelled as the kubelet labels them:
//
//	container_cpu_usage_seconds_total{container,id,image,name,namespace,pod}   counter, one per container
//	container_memory_working_set_bytes{container,id,image,name,namespace,pod}  gauge, one per container
//	container_cpu_usage_seconds_total{id,namespace,pod}                        the pod's cgroup (container="")
//	container_memory_working_set_bytes{id,namespace,pod}                       the pod's cgroup (container="")
//	container_cpu_usage_seconds_total{id="/",node}                             the node's root cgroup
//	container_memory_working_set_bytes{id="/",node}                            the node's root cgroup
//	node_cpu_usage_seconds_total{node}, node_memory_working_set_bytes{node}    the kubelet's /metrics/resource names
//
// (The node label is the one a Prometheus scrape config adds to a kubelet's series.)
// Each container uses the pod's annotation value, as kwok reports it to metrics-server;
// a CPU counter starts at 0 when the exporter first sees its pod Running and grows at the
// annotation's rate from then on ("150m": 0.15 CPU-seconds per second). A node's figures
// sum those of its pods; its CPU counter integrates their rates, so it never decreases
// when a pod goes away.
type usageTracker struct {
	mu     sync.Mutex
	now    func() time.Time
	last   time.Time // the counters are integrated up to last
	logger *slog.Logger

	defaultCPU, defaultMemory float64 // per container, without annotation

	pods  map[types.UID]*podUsage // Running pods with a node
	nodes map[string]*nodeUsage   // kwok nodes
}

type podUsage struct {
	namespace, name, node string
	cgroup                string // /kubepods/<qos>/pod<uid>
	containers            []containerUsage
	cpuRate, memory       float64 // per container: cores and bytes
}

type containerUsage struct {
	name, image, id string
	cpu             float64 // CPU-seconds
}

type nodeUsage struct {
	cpu float64 // CPU-seconds of its pods
}

func newUsageTracker(now func() time.Time, defaultCPU, defaultMemory float64, logger *slog.Logger) *usageTracker {
	return &usageTracker{
		now: now, last: now(), logger: logger,
		defaultCPU: defaultCPU, defaultMemory: defaultMemory,
		pods: map[types.UID]*podUsage{}, nodes: map[string]*nodeUsage{},
	}
}

// advance integrates the CPU counters up to now at the current rates. Callers hold mu.
func (t *usageTracker) advance() {
	now := t.now()
	dt := now.Sub(t.last).Seconds()
	if dt <= 0 {
		return
	}
	t.last = now
	for _, p := range t.pods {
		n := t.nodes[p.node]
		if n == nil {
			continue
		}
		for i := range p.containers {
			p.containers[i].cpu += p.cpuRate * dt
		}
		n.cpu += p.cpuRate * float64(len(p.containers)) * dt
	}
}

func (t *usageTracker) updatePod(pod *corev1.Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance()
	if pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName == "" {
		delete(t.pods, pod.UID)
		return
	}
	p := t.pods[pod.UID]
	if p == nil {
		p = &podUsage{namespace: pod.Namespace, name: pod.Name, node: pod.Spec.NodeName, cgroup: podCgroup(pod)}
		ids := map[string]string{}
		for _, s := range pod.Status.ContainerStatuses {
			if _, id, ok := strings.Cut(s.ContainerID, "://"); ok && id != "" {
				ids[s.Name] = id
			}
		}
		for _, c := range pod.Spec.Containers {
			id := ids[c.Name]
			if id == "" {
				sum := sha256.Sum256([]byte(string(pod.UID) + "/" + c.Name))
				id = hex.EncodeToString(sum[:])
			}
			p.containers = append(p.containers, containerUsage{name: c.Name, image: c.Image, id: id})
		}
		t.pods[pod.UID] = p
	}
	p.cpuRate = t.quantity(pod, usageCPUAnnotation, t.defaultCPU)
	p.memory = t.quantity(pod, usageMemoryAnnotation, t.defaultMemory)
}

func (t *usageTracker) quantity(pod *corev1.Pod, annotation string, def float64) float64 {
	v, ok := pod.Annotations[annotation]
	if !ok {
		return def
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		t.logger.Warn("bad usage annotation; using the default", "pod", pod.Namespace+"/"+pod.Name,
			"annotation", annotation, "value", v, "default", def)
		return def
	}
	return q.AsApproximateFloat64()
}

// podCgroup is the pod's cgroup as cAdvisor names it with the cgroupfs driver.
func podCgroup(pod *corev1.Pod) string {
	switch pod.Status.QOSClass {
	case corev1.PodQOSGuaranteed:
		return "/kubepods/pod" + string(pod.UID)
	case corev1.PodQOSBestEffort:
		return "/kubepods/besteffort/pod" + string(pod.UID)
	}
	return "/kubepods/burstable/pod" + string(pod.UID)
}

func (t *usageTracker) deletePod(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance()
	delete(t.pods, uid)
}

func (t *usageTracker) updateNode(node *corev1.Node) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance()
	if node.Annotations[kwokNodeAnnotation] != kwokNodeValue {
		delete(t.nodes, node.Name)
		return
	}
	if t.nodes[node.Name] == nil {
		t.nodes[node.Name] = &nodeUsage{}
	}
}

func (t *usageTracker) deleteNode(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance()
	delete(t.nodes, name)
}

func (t *usageTracker) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.onPod(obj, false) },
		UpdateFunc: func(_, obj any) { t.onPod(obj, false) },
		DeleteFunc: func(obj any) { t.onPod(obj, true) },
	}
}

func (t *usageTracker) onPod(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if deleted {
		t.deletePod(pod.UID)
	} else {
		t.updatePod(pod)
	}
}

func (t *usageTracker) nodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.onNode(obj, false) },
		UpdateFunc: func(_, obj any) { t.onNode(obj, false) },
		DeleteFunc: func(obj any) { t.onNode(obj, true) },
	}
}

func (t *usageTracker) onNode(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if deleted {
		t.deleteNode(node.Name)
	} else {
		t.updateNode(node)
	}
}

// series returns the current values of all series (see usageTracker).
func (t *usageTracker) series() []sample {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance()
	const cpuName, memName = "container_cpu_usage_seconds_total", "container_memory_working_set_bytes"
	var out []sample
	nodeMemory := map[string]float64{}
	for _, p := range t.pods {
		if t.nodes[p.node] == nil {
			continue
		}
		podCPU := 0.0
		for _, c := range p.containers {
			l := []label{{"container", c.name}, {"id", p.cgroup + "/" + c.id}, {"image", c.image},
				{"name", c.id}, {"namespace", p.namespace}, {"pod", p.name}}
			out = append(out, sample{cpuName, l, c.cpu}, sample{memName, l, p.memory})
			podCPU += c.cpu
		}
		podMemory := p.memory * float64(len(p.containers))
		l := []label{{"id", p.cgroup}, {"namespace", p.namespace}, {"pod", p.name}}
		out = append(out, sample{cpuName, l, podCPU}, sample{memName, l, podMemory})
		nodeMemory[p.node] += podMemory
	}
	for name, n := range t.nodes {
		root := []label{{"id", "/"}, {"node", name}}
		node := []label{{"node", name}}
		out = append(out,
			sample{cpuName, root, n.cpu}, sample{memName, root, nodeMemory[name]},
			sample{"node_cpu_usage_seconds_total", node, n.cpu}, sample{"node_memory_working_set_bytes", node, nodeMemory[name]})
	}
	return out
}
