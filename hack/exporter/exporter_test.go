package main

import (
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseText(t *testing.T) {
	got, err := parseText(`
# TYPE queue_messages_ready gauge
queue_messages_ready{queue="orders", namespace="default"} 12
queue_up 1
odd{a="x\"y\\z",empty=""} +Inf
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`queue_messages_ready{namespace="default",queue="orders"} 12`,
		`queue_up 1`,
		`odd{a="x\"y\\z"} +Inf`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d samples, want %d", len(got), len(want))
	}
	for i, s := range got {
		if line := s.key() + " " + formatValue(s.value); line != want[i] {
			t.Errorf("sample %d: got %s, want %s", i, line, want[i])
		}
	}
	for _, bad := range []string{`x{a="1"} 1 1700000000`, `x{a="1"`, `x{a=1} 1`, `x{a="1",a="2"} 1`, `x`, `1x 1`, `x{__name__="y"} 1`, `x{a=`} {
		if _, err := parseText(bad); err == nil {
			t.Errorf("parseText(%q) succeeded, want an error", bad)
		}
	}
}

func TestHandler(t *testing.T) {
	set := newSeriesStore()
	usage := newUsageTracker(time.Now, 0.001, 1<<20, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(newHandler(set, usage, func() bool { return true }))
	defer srv.Close()
	post := func(path, body string) int {
		resp, err := http.Post(srv.URL+path, "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	metrics := func() string {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if code := post("/set", "q{queue=\"a\"} 1\nq{queue=\"b\"} 2\n"); code != http.StatusNoContent {
		t.Fatalf("set: %d", code)
	}
	if code := post("/set", "q{queue=\"a\"} 5\nbad line here\n"); code != http.StatusBadRequest {
		t.Fatalf("set of a bad body: %d, want 400", code)
	}
	post("/set", `q{queue="a"} 3`)
	if got, want := metrics(), "q{queue=\"a\"} 3\nq{queue=\"b\"} 2\n"; got != want {
		t.Fatalf("metrics:\n%s\nwant:\n%s", got, want)
	}
	post("/reset", "")
	if got := metrics(); got != "" {
		t.Fatalf("metrics after reset: %q", got)
	}
}

func TestUsageIntegratesRates(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	u := newUsageTracker(clock, 0.001, 1<<20, slog.New(slog.NewTextHandler(io.Discard, nil)))
	u.updateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-node-0", Annotations: map[string]string{kwokNodeAnnotation: kwokNodeValue}}})
	u.updateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "real-node"}})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "uid-1",
			Annotations: map[string]string{usageCPUAnnotation: "150m", usageMemoryAnnotation: "64Mi"}},
		Spec: corev1.PodSpec{NodeName: "kwok-node-0", Containers: []corev1.Container{
			{Name: "app", Image: "img:1"}, {Name: "side", Image: "img:2"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://abc"}}},
	}
	u.updatePod(pod)
	other := pod.DeepCopy()
	other.UID, other.Name, other.Spec.NodeName = "uid-2", "elsewhere", "real-node"
	u.updatePod(other)

	now = now.Add(10 * time.Second)
	pod = pod.DeepCopy()
	pod.Annotations[usageCPUAnnotation] = "1"
	u.updatePod(pod)
	now = now.Add(2 * time.Second)

	got := map[string]float64{}
	for _, s := range u.series() {
		got[s.key()] = s.value
	}
	want := map[string]float64{
		`container_cpu_usage_seconds_total{container="app",id="/kubepods/burstable/poduid-1/abc",image="img:1",name="abc",namespace="ns",pod="web-1"}`:  1.5 + 2,
		`container_memory_working_set_bytes{container="app",id="/kubepods/burstable/poduid-1/abc",image="img:1",name="abc",namespace="ns",pod="web-1"}`: 64 << 20,
		`container_cpu_usage_seconds_total{id="/kubepods/burstable/poduid-1",namespace="ns",pod="web-1"}`:                                               7,
		`container_memory_working_set_bytes{id="/kubepods/burstable/poduid-1",namespace="ns",pod="web-1"}`:                                              128 << 20,
		`container_cpu_usage_seconds_total{id="/",node="kwok-node-0"}`:                                                                                  7,
		`container_memory_working_set_bytes{id="/",node="kwok-node-0"}`:                                                                                 128 << 20,
		`node_cpu_usage_seconds_total{node="kwok-node-0"}`:                                                                                              7,
		`node_memory_working_set_bytes{node="kwok-node-0"}`:                                                                                             128 << 20,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || math.Abs(g-v) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if len(got) != len(want)+2 { // plus the side container's two series
		t.Errorf("got %d series, want %d:\n%s", len(got), len(want)+2, formatText(u.series()))
	}

	// A pod that goes away leaves the node's counter where it was.
	u.deletePod("uid-1")
	now = now.Add(time.Second)
	for _, s := range u.series() {
		if s.key() == `node_cpu_usage_seconds_total{node="kwok-node-0"}` && math.Abs(s.value-7) > 1e-9 {
			t.Errorf("node counter after the pod left: %v, want 7", s.value)
		}
		if strings.Contains(s.key(), "web-1") {
			t.Errorf("series of a deleted pod: %s", s.key())
		}
	}
}
