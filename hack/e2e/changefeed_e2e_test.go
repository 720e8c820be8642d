//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// TestChangeFeed measures the goal for the adapter's change feed:
// with syncPeriod 15s, an External metric pushed to the adapter reaches the
// Deployment's spec.replicas with p50 ≤ 1s and p99 ≤ 2s over 24 trials.
// Then the feed goes down while the metrics APIs still answer (the
// autoscaler reaches the feed through a TCP relay the test cuts): the
// autoscaler falls back to polling at the sync period, a change made during
// the outage is applied once the feed is back, before the next period, and
// reactions are fast again.
func TestChangeFeed(t *testing.T) {
	needAutoscaler(t)
	testStart := time.Now()
	disconnects := autoscalerCounter(t, "metricscale_autoscaler_change_feed_disconnects_total")
	const (
		syncPeriod = 15 * time.Second
		trials     = 24
		low, high  = 20, 50 // queue depths: 2 and 5 workers at 10 per worker
	)
	ns := cluster.CreateNamespace(t, "feed")
	queue := "feed-" + ns
	pushDepth(t, queue, low)
	cluster.CreateDeployment(t, KwokDeployment(ns, "workers", 2, "100m", "10m"))
	ma := newMA(ns, "workers", 1, 10, syncPeriod, queueSpec(queue, "10"))
	ma.Spec.Behavior = immediateBehavior()
	createMA(t, ma)
	Eventually(t, 30*time.Second, 100*time.Millisecond, "the autoscaler's first reconcile", func(ctx context.Context) (bool, string, error) {
		m, err := getMA(ctx, ns, "workers")
		if err != nil {
			return false, "", err
		}
		return m.Status.DesiredReplicas == 2 && len(m.Status.CurrentMetrics) == 1, fmt.Sprintf("status %+v", m.Status), nil
	})
	replicas := watchField(t, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, ns, "workers",
		func(u *unstructured.Unstructured) string {
			r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
			return strconv.FormatInt(r, 10)
		})
	// The average the autoscaler last read, which every reconcile that
	// reads a new value writes to the status.
	average := watchField(t, v1alpha1.GroupVersionResource, ns, "workers", func(u *unstructured.Unstructured) string {
		ms, _, _ := unstructured.NestedSlice(u.Object, "status", "currentMetrics")
		if len(ms) == 0 {
			return ""
		}
		v, _, _ := unstructured.NestedString(ms[0].(map[string]any), "external", "current", "averageValue")
		return v
	})

	// trial pushes depth and returns how long the Deployment took to get
	// the replicas it asks for.
	trial := func(t *testing.T, depth int) time.Duration {
		t.Helper()
		want := int32(depth / 10)
		waitSettled(t, ns, "workers")
		// A pause of 1–2s between trials: the feed queues an object at
		// most once a second (--change-feed-min-interval).
		time.Sleep(time.Second + rand.N(time.Second))
		start := time.Now()
		pushDepth(t, queue, depth)
		at := replicas.waitFor(t, start, syncPeriod+5*time.Second, fmt.Sprintf("spec.replicas %d", want), equals(strconv.Itoa(int(want))))
		return at.Sub(start)
	}
	depthOf := func(i int) int {
		if i%2 == 0 {
			return high
		}
		return low
	}

	// ---- 1. the feed as hack/cluster.sh wires it: reaction, 24 trials.
	var lat []time.Duration
	for i := range trials {
		lat = append(lat, trial(t, depthOf(i)))
	}
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	t.Logf("push → spec.replicas over %d trials at syncPeriod %s: p50 %s, p99 %s, min %s, max %s (all: %s)",
		trials, syncPeriod, round(p50), round(p99), round(slices.Min(lat)), round(slices.Max(lat)), roundAll(lat))
	if p50 > time.Second {
		t.Errorf("p50 %s, want ≤ 1s", round(p50))
	}
	if p99 > 2*time.Second {
		t.Errorf("p99 %s, want ≤ 2s", round(p99))
	}

	// ---- 1b. nothing changes: heartbeats only, no reconcile the feed
	// causes; and the feed's one request outlives the API server's request
	// timeout (60s), as a watch does.
	idle := max(65*time.Second-time.Since(testStart), 12*time.Second)
	counters := func() [3]int {
		return [3]int{
			autoscalerCounter(t, `metricscale_autoscaler_change_feed_events_total{type="heartbeat"}`),
			autoscalerCounter(t, `metricscale_autoscaler_change_feed_events_total{type="change"}`),
			autoscalerCounter(t, `metricscale_autoscaler_change_feed_enqueues_total{reason="change"}`),
		}
	}
	c0 := counters()
	time.Sleep(idle)
	c1 := counters()
	t.Logf("idle %s: %d heartbeats, %d change events, %d reconciles queued by the feed",
		round(idle), c1[0]-c0[0], c1[1]-c0[1], c1[2]-c0[2])
	if n := c1[2] - c0[2]; n != 0 {
		t.Errorf("the feed queued %d reconciles while nothing changed", n)
	}
	if c1[0] == c0[0] {
		t.Errorf("no heartbeat in %s of silence", round(idle))
	}
	if n := autoscalerCounter(t, "metricscale_autoscaler_change_feed_disconnects_total") - disconnects; n != 0 {
		t.Errorf("the feed's connection ended %d times during the test's first %s", n, round(time.Since(testStart)))
	}

	// ---- 2. the feed through a relay the test can cut. The metrics APIs
	// keep their own path (kube-apiserver → adapter), untouched.
	relay := startRelay(t, "127.0.0.1:6444")
	t.Cleanup(func() {
		relay.close()
		restartAutoscaler(t) // with the cluster's own wiring again
	})
	restartAutoscalerWith(t, "https://"+relay.addr)
	waitFeedConnected(t, true)
	var viaRelay []time.Duration
	for i := range 4 {
		viaRelay = append(viaRelay, trial(t, depthOf(i)))
	}
	t.Logf("through the relay: %s", roundAll(viaRelay))
	for _, d := range viaRelay {
		if d > 2*time.Second {
			t.Fatalf("through the relay a reaction took %s: the feed does not work there (%s)", round(d), roundAll(viaRelay))
		}
	}
	downBefore := logCount(t, "Change feed down")

	// ---- 3. the feed is down: polling at the sync period.
	relay.cut()
	waitFeedConnected(t, false)
	waitSettled(t, ns, "workers") // 2 workers, depth 20
	// A depth within the tolerance (no rescale) marks the next periodic
	// reconcile, R; a rescale pushed just after it waits for the one after.
	marker := time.Now()
	pushDepth(t, queue, 21)
	r1 := average.waitFor(t, marker, syncPeriod+5*time.Second, "the periodic reconcile reading depth 21", quantity("10500m"))
	pushed := time.Now()
	pushDepth(t, queue, high)
	w1 := replicas.waitFor(t, pushed, syncPeriod+10*time.Second, "spec.replicas 5 by polling", equals("5"))
	t.Logf("feed down: push → spec.replicas %s; periodic reconcile → the next one's write %s (sync period %s)",
		round(w1.Sub(pushed)), round(w1.Sub(r1)), syncPeriod)
	if d := w1.Sub(r1); d < syncPeriod-time.Second || d > syncPeriod+3*time.Second {
		t.Errorf("with the feed down the rescale came %s after the previous reconcile, want one sync period (%s)", round(d), syncPeriod)
	}

	// ---- 4. a change made during the outage is applied once the feed is
	// back, before the next period would have.
	waitSettled(t, ns, "workers") // 5 workers, depth 50
	marker = time.Now()
	pushDepth(t, queue, 52)
	r2 := average.waitFor(t, marker, syncPeriod+5*time.Second, "the periodic reconcile reading depth 52", quantity("10400m"))
	pushed = time.Now()
	pushDepth(t, queue, low)
	time.Sleep(time.Second)
	if r, err := replicasOf(context.Background(), ns, "workers"); err != nil || r != 5 {
		t.Fatalf("during the outage: %d replicas (%v), want still 5", r, err)
	}
	restored := time.Now()
	relay.up(t)
	w2 := replicas.waitFor(t, pushed, syncPeriod+10*time.Second, "spec.replicas 2 after the feed is back", equals("2"))
	t.Logf("change during the outage: applied %s after the feed came back (%s after the push; the next period was due %s after the push)",
		round(w2.Sub(restored)), round(w2.Sub(pushed)), round(r2.Add(syncPeriod).Sub(pushed)))
	if w2.After(r2.Add(syncPeriod - time.Second)) {
		t.Errorf("the change made during the outage was applied %s after the previous reconcile: by polling, not on reconnect", round(w2.Sub(r2)))
	}
	if d := w2.Sub(restored); d > 8*time.Second {
		t.Errorf("the change made during the outage was applied %s after the feed came back, want within the reconnect backoff (5s)", round(d))
	}
	waitFeedConnected(t, true)
	if n := logCount(t, "Change feed down") - downBefore; n != 1 {
		t.Errorf("the outage was logged %d times, want once", n)
	}

	// ---- 5. fast again.
	var after []time.Duration
	for i := range 4 {
		after = append(after, trial(t, depthOf(i)))
	}
	t.Logf("feed back: %s", roundAll(after))
	for _, d := range after {
		if d > 2*time.Second {
			t.Errorf("after the outage a reaction took %s, want ≤ 2s (%s)", round(d), roundAll(after))
		}
	}
}

// immediateBehavior applies every proposal at once: no stabilization, and
// policies wide enough for any step of the test.
func immediateBehavior() *autoscalingv2.HorizontalPodAutoscalerBehavior {
	zero := int32(0)
	rules := func() *autoscalingv2.HPAScalingRules {
		return &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &zero, Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 100, PeriodSeconds: 1},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 1000, PeriodSeconds: 1},
		}}
	}
	return &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: rules(), ScaleDown: rules()}
}

// waitSettled waits until the Deployment has the pods its spec asks for,
// so that the next trial's decision reads settled replicas.
func waitSettled(t *testing.T, ns, name string) {
	t.Helper()
	Eventually(t, 30*time.Second, 50*time.Millisecond, "deployment "+name+" settled", func(ctx context.Context) (bool, string, error) {
		d, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return *d.Spec.Replicas == d.Status.Replicas && d.Status.ObservedGeneration == d.Generation,
			fmt.Sprintf("spec %d status %d", *d.Spec.Replicas, d.Status.Replicas), nil
	})
}

// fieldWatcher records when a value of one object changed, from a watch.
type fieldWatcher struct {
	mu     sync.Mutex
	seen   []seenValue
	notify chan struct{}
}

type seenValue struct {
	at    time.Time
	value string
}

// watchField watches one object and records each new value of extract.
func watchField(t *testing.T, gvr schema.GroupVersionResource, ns, name string, extract func(*unstructured.Unstructured) string) *fieldWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	w := &fieldWatcher{notify: make(chan struct{}, 1)}
	res := cluster.Dynamic.Resource(gvr).Namespace(ns)
	u, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.record(extract(u))
	go func() {
		defer close(done)
		rv := u.GetResourceVersion()
		for ctx.Err() == nil {
			wi, err := res.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: rv})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range wi.ResultChan() {
				if obj, ok := ev.Object.(*unstructured.Unstructured); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
					rv = obj.GetResourceVersion()
					w.record(extract(obj))
				}
			}
			wi.Stop()
		}
	}()
	return w
}

func (w *fieldWatcher) record(v string) {
	now := time.Now()
	w.mu.Lock()
	if n := len(w.seen); n == 0 || w.seen[n-1].value != v {
		w.seen = append(w.seen, seenValue{at: now, value: v})
	}
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// waitFor returns when a value that ok accepts was first seen after since.
func (w *fieldWatcher) waitFor(t *testing.T, since time.Time, timeout time.Duration, what string, ok func(string) bool) time.Time {
	t.Helper()
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		var last string
		for _, s := range w.seen {
			last = s.value
			if s.at.After(since) && ok(s.value) {
				w.mu.Unlock()
				return s.at
			}
		}
		w.mu.Unlock()
		select {
		case <-w.notify:
		case <-deadline:
			t.Fatalf("no %s within %s (last value %q)", what, timeout, last)
		}
	}
}

func equals(want string) func(string) bool { return func(v string) bool { return v == want } }

func quantity(want string) func(string) bool {
	w := resource.MustParse(want)
	return func(v string) bool {
		q, err := resource.ParseQuantity(v)
		return err == nil && q.Cmp(w) == 0
	}
}

// restartAutoscalerWith restarts the cluster's autoscaler with another change feed
// (hack/cluster.sh restart-autoscaler --change-feed-url).
func restartAutoscalerWith(t *testing.T, changeFeedURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cluster.RestartAutoscaler(ctx, changeFeedURL); err != nil {
		t.Fatal(err)
	}
}

// waitFeedConnected waits for the autoscaler's change_feed_connected gauge.
func waitFeedConnected(t *testing.T, want bool) {
	t.Helper()
	wantValue := "0"
	if want {
		wantValue = "1"
	}
	Eventually(t, 60*time.Second, 50*time.Millisecond, "metricscale_autoscaler_change_feed_connected "+wantValue, func(ctx context.Context) (bool, string, error) {
		body, err := autoscalerGet(ctx, autoscalerAddr, "/metrics")
		if err != nil {
			return false, "", err
		}
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, "metricscale_autoscaler_change_feed_connected "); ok {
				return strings.TrimSpace(v) == wantValue, line, nil
			}
		}
		return false, "no change_feed_connected gauge", nil
	})
}

// autoscalerCounter reads a counter (the sample line's name and labels) from
// the autoscaler's /metrics; 0 when absent.
func autoscalerCounter(t *testing.T, sample string) int {
	t.Helper()
	body, err := autoscalerGet(context.Background(), autoscalerAddr, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return int(n)
		}
	}
	return 0
}

// logCount counts the autoscaler log's lines that contain s.
func logCount(t *testing.T, s string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.Dir, "logs", "metricscale-autoscaler.log"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), s)
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1 // nearest rank
	return s[max(i, 0)]
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func roundAll(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = round(d).String()
	}
	return strings.Join(out, " ")
}

// relay is a TCP relay to the adapter's secure port that the test can cut
// (every connection closed, new ones refused) and restore on the same
// address: the feed's outage, while the metrics APIs answer.
type relay struct {
	target, addr string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	r.serve(ln)
	return r
}

func (r *relay) serve(ln net.Listener) {
	r.mu.Lock()
	r.ln = ln
	r.mu.Unlock()
	r.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.wg.Go(func() { r.pipe(c) })
		}
	})
}

func (r *relay) pipe(c net.Conn) {
	up, err := net.DialTimeout("tcp", r.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	r.mu.Lock()
	if r.ln == nil { // cut meanwhile
		r.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	r.conns[c], r.conns[up] = struct{}{}, struct{}{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range [][2]net.Conn{{up, c}, {c, up}} {
		wg.Go(func() {
			_, _ = io.Copy(p[0], p[1])
			p[0].Close()
			p[1].Close()
		})
	}
	wg.Wait()
	r.mu.Lock()
	delete(r.conns, c)
	delete(r.conns, up)
	r.mu.Unlock()
}

// cut closes the listener and every relayed connection.
func (r *relay) cut() {
	r.mu.Lock()
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
}

// up listens again on the same address.
func (r *relay) up(t *testing.T) {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port was just released
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			r.serve(ln)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("relay: listening on %s again: %v", r.addr, err)
}

func (r *relay) close() {
	r.cut()
	r.wg.Wait()
}
