// Command oracle runs kube-controller-manager's own HPA controller
// (k8s.io/kubernetes/pkg/controller/podautoscaler, unmodified) against an
// autoscaling/v2 scenario of docs/scenarios.md and writes what it did at
// each step, one JSON line per step, in the format of the scenario
// examples' *.expected.jsonl. It is built by run.sh with the faketime tag
// (the Go runtime's virtual clock: time.Sleep moves it instantly), so that
// the controller's time.Now() is the scenario's clock; linkname.go calls
// its reconcile.
//
// Usage (through run.sh): oracle -f SCENARIO.yaml -o OUT.jsonl
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	autoscalingv2defaults "k8s.io/kubernetes/pkg/apis/autoscaling/v2"
	"k8s.io/kubernetes/pkg/controller/podautoscaler"
	metricsclient "k8s.io/kubernetes/pkg/controller/podautoscaler/metrics"
	cmapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emapi "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
	"sigs.k8s.io/yaml"
)

// errUnavailable is what a failing API answers (a 503).
var errUnavailable = errors.New("the server is currently unable to handle the request")

type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = duration(v)
	return err
}

type scenario struct {
	Start      metav1.Time `json:"start"`
	Controller struct {
		Tolerance                    *float64  `json:"tolerance"`
		CPUInitializationPeriod      *duration `json:"cpuInitializationPeriod"`
		InitialReadinessDelay        *duration `json:"initialReadinessDelay"`
		DownscaleStabilizationWindow *duration `json:"downscaleStabilizationWindow"`
	} `json:"controller"`
	FeatureGates map[string]bool                       `json:"featureGates"`
	Autoscaler   autoscalingv2.HorizontalPodAutoscaler `json:"autoscaler"`
	Steps        []step                                `json:"steps"`
}

type step struct {
	At    duration `json:"at"`
	Scale *struct {
		Replicas       int32  `json:"replicas"`
		StatusReplicas *int32 `json:"statusReplicas"`
		Selector       string `json:"selector"`
	} `json:"scale"`
	Pods            *[]corev1.Pod     `json:"pods"`
	PodMetrics      *[]podMetric      `json:"podMetrics"`
	CustomMetrics   *[]customMetric   `json:"customMetrics"`
	ExternalMetrics *[]externalMetric `json:"externalMetrics"`
	Failures        *[]failure        `json:"failures"`
	Autoscaler      *struct {
		Spec autoscalingv2.HorizontalPodAutoscalerSpec `json:"spec"`
	} `json:"autoscaler"`
}

type podMetric struct {
	Pod        string                         `json:"pod"`
	Timestamp  *metav1.Time                   `json:"timestamp"`
	Window     *duration                      `json:"window"`
	Containers map[string]corev1.ResourceList `json:"containers"`
}

type customMetric struct {
	Object struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Name       string `json:"name"`
	} `json:"object"`
	Metric    string            `json:"metric"`
	Labels    map[string]string `json:"labels"`
	Value     resource.Quantity `json:"value"`
	Timestamp *metav1.Time      `json:"timestamp"`
	Window    *duration         `json:"window"`
}

type externalMetric struct {
	Metric    string            `json:"metric"`
	Labels    map[string]string `json:"labels"`
	Value     resource.Quantity `json:"value"`
	Timestamp *metav1.Time      `json:"timestamp"`
}

type failure struct {
	API    string `json:"api"`
	Metric string `json:"metric"`
}

// result is one line of *.expected.jsonl.
type result struct {
	At       string                                      `json:"at"`
	Replicas int32                                       `json:"replicas"`
	Rescaled bool                                        `json:"rescaled"`
	Error    string                                      `json:"error"`
	Status   autoscalingv2.HorizontalPodAutoscalerStatus `json:"status"`
}

// world is what the fake APIs answer at the current step.
type world struct {
	namespace string
	now       time.Time
	pods      []corev1.Pod
	podM      []podMetric
	custom    []customMetric
	external  []externalMetric
	failures  []failure
}

func (w *world) fails(api, metric string) bool {
	for _, f := range w.failures {
		if f.API == api && (f.Metric == "" || f.Metric == metric) {
			return true
		}
	}
	return false
}

func (w *world) pod(name string, sel labels.Selector) *corev1.Pod {
	for i := range w.pods {
		p := &w.pods[i]
		if p.Name == name && (p.Namespace == "" || p.Namespace == w.namespace) && (sel == nil || sel.Matches(labels.Set(p.Labels))) {
			return p
		}
	}
	return nil
}

func (w *world) at(t *metav1.Time) metav1.Time {
	if t != nil {
		return *t
	}
	return metav1.NewTime(w.now)
}

func main() {
	file := flag.String("f", "", "scenario file")
	out := flag.String("o", "", "output file (JSON Lines); under faketime standard output is framed, so a file is required")
	flag.Parse()
	if err := run(*file, *out); err != nil {
		fmt.Fprintf(os.Stderr, "oracle: %v\n", err)
		os.Exit(1)
	}
}

func run(file, out string) error {
	if file == "" || out == "" {
		return errors.New("-f and -o are required")
	}
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var s scenario
	if err := yaml.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if s.Autoscaler.Kind != "" && s.Autoscaler.Kind != "HorizontalPodAutoscaler" {
		return fmt.Errorf("%s: the oracle replays autoscaling/v2 HorizontalPodAutoscalers only", file)
	}
	// The consistency store waits for an informer that this harness never
	// starts; it orders a real controller's reads, not its decisions.
	gates := map[string]bool{}
	if _, ok := utilfeature.DefaultMutableFeatureGate.GetAll()["StaleControllerConsistencyHPA"]; ok {
		gates["StaleControllerConsistencyHPA"] = false
	}
	for k, v := range s.FeatureGates {
		gates[k] = v
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
		return fmt.Errorf("%s: featureGates: %w", file, err)
	}

	// The API server's defaulting, as it stores the object.
	hpa := s.Autoscaler.DeepCopy()
	if hpa.Namespace == "" {
		hpa.Namespace = metav1.NamespaceDefault
	}
	autoscalingv2defaults.SetObjectDefaults_HorizontalPodAutoscaler(hpa)
	if gateOn("HPAGeneration") && hpa.Generation == 0 {
		hpa.Generation = 1
	}

	// Move the virtual clock (faketime starts in 2009) to the start.
	time.Sleep(time.Until(s.Start.Time))

	w := &world{namespace: hpa.Namespace}
	var (
		scale      autoscalingv1.Scale
		rescaled   bool
		lines      []result
		written    *autoscalingv2.HorizontalPodAutoscalerStatus
		scaleWrote bool
	)

	kube := fake.NewSimpleClientset()
	kube.PrependReactor("update", "horizontalpodautoscalers", func(a core.Action) (bool, runtime.Object, error) {
		obj := a.(core.UpdateAction).GetObject().(*autoscalingv2.HorizontalPodAutoscaler)
		st := obj.Status.DeepCopy()
		written = st
		return true, obj, nil
	})
	scales := &scalefake.FakeScaleClient{}
	scales.AddReactor("get", "*", func(a core.Action) (bool, runtime.Object, error) {
		return true, scale.DeepCopy(), nil
	})
	scales.AddReactor("update", "*", func(a core.Action) (bool, runtime.Object, error) {
		if w.fails("scale", "") {
			return true, nil, errUnavailable
		}
		obj := a.(core.UpdateAction).GetObject().(*autoscalingv1.Scale)
		scale.Spec.Replicas = obj.Spec.Replicas
		scaleWrote = true
		return true, obj, nil
	})

	resourceMetrics := &metricsfake.Clientset{}
	resourceMetrics.AddReactor("list", "pods", func(a core.Action) (bool, runtime.Object, error) {
		if w.fails("metrics.k8s.io", "") {
			return true, nil, errUnavailable
		}
		sel := a.(core.ListAction).GetListRestrictions().Labels
		list := &metricsapi.PodMetricsList{}
		for _, m := range w.podM {
			p := w.pod(m.Pod, sel)
			if p == nil {
				continue
			}
			pm := metricsapi.PodMetrics{
				ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: w.namespace, Labels: p.Labels},
				Timestamp:  w.at(m.Timestamp),
				Window:     metav1.Duration{Duration: 30 * time.Second},
			}
			if m.Window != nil {
				pm.Window.Duration = time.Duration(*m.Window)
			}
			for _, name := range sortedKeys(m.Containers) {
				pm.Containers = append(pm.Containers, metricsapi.ContainerMetrics{Name: name, Usage: m.Containers[name]})
			}
			list.Items = append(list.Items, pm)
		}
		return true, list, nil
	})
	metrics := failingResources{
		MetricsClient: metricsclient.NewRESTMetricsClient(resourceMetrics.MetricsV1beta1(), customMetrics{w}, externalMetrics{w}),
		w:             w,
	}

	factory := informers.NewSharedInformerFactory(kube, 0)
	hpaInformer := factory.Autoscaling().V2().HorizontalPodAutoscalers()
	podInformer := factory.Core().V1().Pods()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	tolerance := 0.1
	if s.Controller.Tolerance != nil {
		tolerance = *s.Controller.Tolerance
	}
	cpuInit, readiness, downscale := 5*time.Minute, 30*time.Second, 5*time.Minute
	if d := s.Controller.CPUInitializationPeriod; d != nil {
		cpuInit = time.Duration(*d)
	}
	if d := s.Controller.InitialReadinessDelay; d != nil {
		readiness = time.Duration(*d)
	}
	if d := s.Controller.DownscaleStabilizationWindow; d != nil {
		downscale = time.Duration(*d)
	}
	ctrl := podautoscaler.NewHorizontalController(ctx, kube.CoreV1(), scales, kube.AutoscalingV2(),
		mapper(), metrics, hpaInformer, podInformer, 15*time.Second, downscale, tolerance, cpuInit, readiness)
	enqueueHPA(ctrl, hpa.DeepCopy())
	key := hpa.Namespace + "/" + hpa.Name
	hpaStore := hpaInformer.Informer().GetStore()
	podStore := podInformer.Informer().GetStore()

	for _, st := range s.Steps {
		time.Sleep(time.Until(s.Start.Add(time.Duration(st.At))))
		w.now = s.Start.Add(time.Duration(st.At))
		if st.Autoscaler != nil {
			spec := st.Autoscaler.Spec.DeepCopy()
			next := hpa.DeepCopy()
			next.Spec = *spec
			autoscalingv2defaults.SetObjectDefaults_HorizontalPodAutoscaler(next)
			if gateOn("HPAGeneration") && !equalJSON(next.Spec, hpa.Spec) {
				next.Generation++
			}
			hpa = next
		}
		switch {
		case st.Scale != nil:
			scale = autoscalingv1.Scale{
				ObjectMeta: metav1.ObjectMeta{Name: hpa.Spec.ScaleTargetRef.Name, Namespace: hpa.Namespace},
				Spec:       autoscalingv1.ScaleSpec{Replicas: st.Scale.Replicas},
				Status:     autoscalingv1.ScaleStatus{Replicas: st.Scale.Replicas, Selector: st.Scale.Selector},
			}
			if st.Scale.StatusReplicas != nil {
				scale.Status.Replicas = *st.Scale.StatusReplicas
			}
		case rescaled:
			scale.Status.Replicas = scale.Spec.Replicas
		}
		if st.Pods != nil {
			w.pods = *st.Pods
			if err := podStore.Replace(nil, ""); err != nil {
				return err
			}
			for j := range w.pods {
				p := w.pods[j].DeepCopy()
				if p.Namespace == "" {
					p.Namespace = hpa.Namespace
				}
				if p.Namespace != hpa.Namespace {
					continue
				}
				if err := podStore.Add(p); err != nil {
					return err
				}
			}
		}
		if st.PodMetrics != nil {
			w.podM = *st.PodMetrics
		}
		if st.CustomMetrics != nil {
			w.custom = *st.CustomMetrics
		}
		if st.ExternalMetrics != nil {
			w.external = *st.ExternalMetrics
		}
		if st.Failures != nil {
			w.failures = *st.Failures
		}
		if err := hpaStore.Update(hpa.DeepCopy()); err != nil {
			if err := hpaStore.Add(hpa.DeepCopy()); err != nil {
				return err
			}
		}

		written, scaleWrote = nil, false
		_, err := reconcileKey(ctrl, ctx, key)
		r := result{At: time.Duration(st.At).String(), Replicas: scale.Spec.Replicas, Rescaled: scaleWrote}
		if err != nil {
			r.Error = err.Error()
		}
		if written != nil {
			hpa.Status = *stored(written)
		}
		r.Status = hpa.Status
		rescaled = scaleWrote
		lines = append(lines, r)
	}

	f, err := os.Create(out)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	enc.SetEscapeHTML(false)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// gateOn says whether a feature gate of this Kubernetes version is on; a
// gate the version does not have is off.
func gateOn(name string) bool {
	if _, ok := utilfeature.DefaultMutableFeatureGate.GetAll()[featuregate.Feature(name)]; !ok {
		return false
	}
	return utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(name))
}

// stored is a status as the API server keeps it: times in whole seconds.
func stored(s *autoscalingv2.HorizontalPodAutoscalerStatus) *autoscalingv2.HorizontalPodAutoscalerStatus {
	data, _ := json.Marshal(s)
	out := &autoscalingv2.HorizontalPodAutoscalerStatus{}
	_ = json.Unmarshal(data, out)
	return out
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func sortedKeys(m map[string]corev1.ResourceList) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] < keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	return keys
}

// mapper maps a kind to its lowercase plural resource in its group, as
// a discovery-backed mapper does for the workload kinds.
func mapper() apimeta.RESTMapper {
	return anyKindMapper{}
}

type anyKindMapper struct{ apimeta.RESTMapper }

func (anyKindMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*apimeta.RESTMapping, error) {
	v := ""
	if len(versions) > 0 {
		v = versions[0]
	}
	plural, _ := apimeta.UnsafeGuessKindToResource(gk.WithVersion(v))
	return []*apimeta.RESTMapping{{Resource: plural, GroupVersionKind: gk.WithVersion(v), Scope: apimeta.RESTScopeNamespace}}, nil
}

// failingResources fails the reads of one resource of metrics.k8s.io
// (`failures: [{api: metrics.k8s.io, metric: cpu}]`): the one list of
// PodMetrics serves every resource, so it fails here, per resource.
type failingResources struct {
	metricsclient.MetricsClient
	w *world
}

func (f failingResources) GetResourceMetric(ctx context.Context, res corev1.ResourceName, namespace string, selector labels.Selector, container string) (metricsclient.PodMetricsInfo, time.Time, error) {
	for _, fl := range f.w.failures {
		if fl.API == "metrics.k8s.io" && fl.Metric == string(res) {
			return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from resource metrics API: %w", errUnavailable)
		}
	}
	return f.MetricsClient.GetResourceMetric(ctx, res, namespace, selector, container)
}

type customMetrics struct{ w *world }

func (c customMetrics) RootScopedMetrics() customclient.MetricsInterface { return c }
func (c customMetrics) NamespacedMetrics(string) customclient.MetricsInterface {
	return c
}

// wire is a selector as it travels to a metrics API: a string, where no
// selector (labels.Nothing, from a nil LabelSelector) is the empty string
// and matches everything.
func wire(sel labels.Selector) labels.Selector {
	parsed, err := labels.Parse(sel.String())
	if err != nil {
		return labels.Nothing()
	}
	return parsed
}

func (c customMetrics) GetForObject(gk schema.GroupKind, name, metricName string, metricSelector labels.Selector) (*cmapi.MetricValue, error) {
	w := c.w
	metricSelector = wire(metricSelector)
	if w.fails("custom.metrics.k8s.io", metricName) {
		return nil, errUnavailable
	}
	for _, m := range w.custom {
		if m.Metric != metricName || m.Object.Kind != gk.Kind || m.Object.Name != name || !metricSelector.Matches(labels.Set(m.Labels)) {
			continue
		}
		if m.Object.APIVersion != "" {
			if gv, err := schema.ParseGroupVersion(m.Object.APIVersion); err != nil || gv.Group != gk.Group {
				continue
			}
		}
		return c.value(m), nil
	}
	return nil, fmt.Errorf("the server could not find the metric %s for %s %s", metricName, strings.ToLower(gk.Kind), name)
}

func (c customMetrics) GetForObjects(gk schema.GroupKind, selector labels.Selector, metricName string, metricSelector labels.Selector) (*cmapi.MetricValueList, error) {
	w := c.w
	selector, metricSelector = wire(selector), wire(metricSelector)
	if w.fails("custom.metrics.k8s.io", metricName) {
		return nil, errUnavailable
	}
	list := &cmapi.MetricValueList{}
	for i := range w.pods {
		p := &w.pods[i]
		if (p.Namespace != "" && p.Namespace != w.namespace) || !selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		for _, m := range w.custom {
			if m.Metric == metricName && m.Object.Kind == "Pod" && m.Object.Name == p.Name && metricSelector.Matches(labels.Set(m.Labels)) {
				list.Items = append(list.Items, *c.value(m))
				break
			}
		}
	}
	return list, nil
}

func (c customMetrics) value(m customMetric) *cmapi.MetricValue {
	window := int64(60)
	if m.Window != nil {
		window = int64(time.Duration(*m.Window) / time.Second)
	}
	return &cmapi.MetricValue{
		DescribedObject: corev1.ObjectReference{Kind: m.Object.Kind, Name: m.Object.Name, Namespace: c.w.namespace, APIVersion: m.Object.APIVersion},
		Metric:          cmapi.MetricIdentifier{Name: m.Metric},
		Timestamp:       c.w.at(m.Timestamp),
		WindowSeconds:   &window,
		Value:           m.Value,
	}
}

type externalMetrics struct{ w *world }

func (e externalMetrics) NamespacedMetrics(string) externalclient.MetricsInterface { return e }

func (e externalMetrics) List(metricName string, metricSelector labels.Selector) (*emapi.ExternalMetricValueList, error) {
	w := e.w
	metricSelector = wire(metricSelector)
	if w.fails("external.metrics.k8s.io", metricName) {
		return nil, errUnavailable
	}
	list := &emapi.ExternalMetricValueList{}
	for _, m := range w.external {
		if m.Metric == metricName && metricSelector.Matches(labels.Set(m.Labels)) {
			list.Items = append(list.Items, emapi.ExternalMetricValue{MetricName: m.Metric, MetricLabels: m.Labels, Timestamp: w.at(m.Timestamp), Value: m.Value})
		}
	}
	return list, nil
}
