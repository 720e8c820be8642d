package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/metrics/pkg/apis/external_metrics"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/adapter/config"
	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/memory"
	"github.com/metricscale/metricscale/providers/naming"
)

// gateProvider is a test provider of type "gate": it answers its options'
// value for any external metric, blocking first until released when its
// options say block, and records its Runner and Close.
type gateProvider struct {
	name    string
	value   float64
	block   bool
	unready bool
	entered chan struct{}
	release chan struct{}
	closed  chan struct{}
	running atomic.Int32
}

func (p *gateProvider) Name() string { return p.name }

func (p *gateProvider) GetExternalMetric(context.Context, string, labels.Selector, providers.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	select {
	case <-p.closed:
		return nil, errors.New("query on a closed provider")
	default:
	}
	if p.block {
		p.entered <- struct{}{}
		<-p.release
	}
	return &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{{MetricName: p.name, Value: memory.Quantity(p.value)}}}, nil
}

func (p *gateProvider) ListAllExternalMetrics() []providers.ExternalMetricInfo {
	return []providers.ExternalMetricInfo{{Metric: "gate_" + p.name}}
}

func (p *gateProvider) Run(ctx context.Context) {
	p.running.Add(1)
	defer p.running.Add(-1)
	<-ctx.Done()
}

func (p *gateProvider) Ready(context.Context) error {
	if p.unready {
		return errors.New("backend not reachable yet")
	}
	return nil
}

func (p *gateProvider) Close() error {
	close(p.closed)
	return nil
}

type gateOptions struct {
	Value    float64 `json:"value"`
	Block    bool    `json:"block"`
	NotReady bool    `json:"notReady"`
}

// gateFactory builds gate providers and remembers each one; type "broken"
// (fail set) fails to build, as a provider that cannot reach its backend.
type gateFactory struct {
	fail bool

	mu    sync.Mutex
	built []*gateProvider
}

func (f *gateFactory) Validate(field string, raw json.RawMessage) error {
	var o gateOptions
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &o); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
	}
	return nil
}

func (f *gateFactory) New(name string, raw json.RawMessage, _ providers.Deps) (providers.Provider, error) {
	if f.fail {
		return nil, fmt.Errorf("connecting to backend for %q: connection refused", name)
	}
	var o gateOptions
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, err
		}
	}
	p := &gateProvider{name: name, value: o.Value, block: o.Block, unready: o.NotReady, entered: make(chan struct{}, 8), release: make(chan struct{}), closed: make(chan struct{})}
	f.mu.Lock()
	f.built = append(f.built, p)
	f.mu.Unlock()
	return p, nil
}

func (f *gateFactory) last() *gateProvider {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.built[len(f.built)-1]
}

func (f *gateFactory) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.built)
}

// reloadEnv is a reloader over a config file in a temporary directory,
// started, with a fake clock for its timers.
type reloadEnv struct {
	t     *testing.T
	dir   string
	file  string
	rl    *reloader
	gates *gateFactory
	clk   *clocktesting.FakeClock
	ctx   context.Context

	mu     sync.Mutex
	events []string
}

func newReloadEnv(t *testing.T, initial string) *reloadEnv {
	t.Helper()
	registerReloadMetrics()
	e := &reloadEnv{t: t, dir: t.TempDir(), gates: &gateFactory{}, clk: clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	e.file = filepath.Join(e.dir, "config.yaml")
	if err := os.WriteFile(e.file, []byte(initial), 0o644); err != nil {
		t.Fatal(err)
	}
	factories := map[string]providers.Factory{memory.Type: memory.Factory{SeriesTTL: time.Hour, MaxAge: time.Hour}, "gate": e.gates, "broken": &gateFactory{fail: true}}
	parse := func(data []byte) (*config.Config, error) { return config.Parse(data, factories) }
	deps := providers.Deps{Resources: naming.NewResolver(meta.NewDefaultRESTMapper(nil), nil), Clock: e.clk}
	e.rl = newReloader(e.file, parse, factories, deps)
	e.rl.clock = e.clk
	e.rl.events = func(eventtype, reason, message string) {
		e.mu.Lock()
		e.events = append(e.events, eventtype+" "+reason+" "+message)
		e.mu.Unlock()
	}
	cfg, err := parse([]byte(initial))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.rl.init(cfg, []byte(initial)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	e.rl.start(ctx)
	t.Cleanup(func() {
		cancel()
		e.rl.stop()
	})
	return e
}

func (e *reloadEnv) lastEvent() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.events) == 0 {
		return ""
	}
	return e.events[len(e.events)-1]
}

// value queries an external metric through the registry.
func (e *reloadEnv) value(metric string) (float64, error) {
	list, err := e.rl.reg.GetExternalMetric(context.Background(), "default", labels.Everything(), providers.ExternalMetricInfo{Metric: metric})
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, it := range list.Items {
		sum += float64(it.Value.MilliValue()) / 1000
	}
	return sum, nil
}

// write replaces the config file as an editor does: a new file renamed
// over the old one.
func (e *reloadEnv) write(content string) {
	e.t.Helper()
	tmp := e.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, e.file); err != nil {
		e.t.Fatal(err)
	}
}

func counter(t *testing.T, result string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(reloadsTotal.WithLabelValues(result))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const memAndGate = `
providers:
- name: mem
  type: memory
- name: g
  type: gate
  options: {value: 1}
routes:
- metric: "gate_*"
  provider: g
- metric: "*"
  provider: mem
`

// TestReloadKeepsUnchangedProvider: a reload that changes only the routes
// keeps the memory provider itself, with its pushed series, and serves the
// new route at once; the counter and the info gauge say so.
func TestReloadKeepsUnchangedProvider(t *testing.T) {
	e := newReloadEnv(t, memAndGate)
	reg := e.rl.reg
	if err := reg.Append([]providers.Sample{{Name: "queue_depth", Labels: map[string]string{"queue": "a"}, Value: 7}}); err != nil {
		t.Fatal(err)
	}
	memBefore := reg.Route("queue_depth", "external").Provider
	gateBefore := reg.Route("gate_x", "external").Provider
	success := counter(t, reloadSuccess)

	// route other_* to the gate too, and raise the memory provider's timeout
	changed := strings.Replace(memAndGate, `- metric: "*"`, "- metric: \"other_*\"\n  provider: g\n- metric: \"*\"", 1)
	changed = strings.Replace(changed, "type: memory", "type: memory\n  timeout: 9s", 1)
	if got := e.rl.apply([]byte(changed), "test"); got != reloadApplied {
		t.Fatalf("apply: %v, want applied (events %v)", got, e.events)
	}
	if v, err := e.value("queue_depth"); err != nil || v != 7 {
		t.Errorf("pushed series after the reload: %v %v, want 7", v, err)
	}
	if in := reg.Route("queue_depth", "external"); in.Provider != memBefore || in.Timeout != 9*time.Second {
		t.Errorf("memory provider: same instance %v, timeout %s; want the same one with 9s", in.Provider == memBefore, in.Timeout)
	}
	if reg.Route("gate_x", "external").Provider != gateBefore || e.gates.count() != 1 {
		t.Errorf("the unchanged gate provider was rebuilt (%d built)", e.gates.count())
	}
	if v, err := e.value("other_thing"); err != nil || v != 1 {
		t.Errorf("new route other_*: %v %v, want 1 from the gate", v, err)
	}
	var disc []string
	for _, m := range reg.ListAllExternalMetrics() {
		disc = append(disc, m.Metric)
	}
	if !strings.Contains(strings.Join(disc, " "), "queue_depth") {
		t.Errorf("discovery after the reload: %v", disc)
	}
	if d := counter(t, reloadSuccess) - success; d != 1 {
		t.Errorf("success counter went up by %v, want 1", d)
	}
	if v, err := testutil.GetGaugeMetricValue(configInfo.WithLabelValues(hashOf([]byte(changed)))); err != nil || v != 1 {
		t.Errorf("config_info of the new hash: %v %v", v, err)
	}
	if ev := e.lastEvent(); !strings.HasPrefix(ev, "Normal ConfigReloaded") {
		t.Errorf("event %q, want Normal ConfigReloaded", ev)
	}
	// the same content again is no reload
	if got := e.rl.apply([]byte(changed), "test"); got != reloadUnchanged {
		t.Errorf("same content again: %v, want unchanged", got)
	}
}

// TestReloadReplacesChangedProviderAfterInflight: a provider whose options
// change gets a new instance; a query already inside the old one finishes
// with the old answer, and the old one is closed (and its loop stopped) only
// after that.
func TestReloadReplacesChangedProviderAfterInflight(t *testing.T) {
	// a long timeout: the blocked query must not be answered by the registry's timeout
	slow := strings.Replace(memAndGate, "type: gate", "type: gate\n  timeout: 60s", 1)
	e := newReloadEnv(t, strings.Replace(slow, "{value: 1}", "{value: 1, block: true}", 1))
	old := e.gates.last()
	eventually(t, "the gate's loop runs", func() bool { return old.running.Load() == 1 })
	type answer struct {
		v   float64
		err error
	}
	inflight := make(chan answer, 1)
	go func() {
		v, err := e.value("gate_x")
		inflight <- answer{v, err}
	}()
	<-old.entered

	if got := e.rl.apply([]byte(strings.Replace(slow, "{value: 1}", "{value: 2}", 1)), "test"); got != reloadApplied {
		t.Fatalf("apply: %v (events %v)", got, e.events)
	}
	fresh := e.gates.last()
	if fresh == old {
		t.Fatal("changed options kept the old instance")
	}
	if v, err := e.value("gate_x"); err != nil || v != 2 {
		t.Errorf("new query: %v %v, want 2 from the new instance", v, err)
	}
	select {
	case <-old.closed:
		t.Fatal("the old provider was closed while a query ran on it")
	default:
	}
	if old.running.Load() != 1 {
		t.Error("the old provider's loop stopped while a query ran on it")
	}

	close(old.release)
	if a := <-inflight; a.err != nil || a.v != 1 {
		t.Errorf("in-flight query: %v %v, want 1 from the old instance", a.v, a.err)
	}
	select {
	case <-old.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the old provider was never closed after its query returned")
	}
	if old.running.Load() != 0 {
		t.Errorf("the old provider was closed with its loop running")
	}
	eventually(t, "the new gate's loop runs", func() bool { return fresh.running.Load() == 1 })
}

// TestReloadRefusesInvalidConfig: every kind of invalid change keeps the
// running config whole, counts a failure and says why in a Warning event
// naming the field or provider.
func TestReloadRefusesInvalidConfig(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"YAML error", "providers: [\n", "yaml"},
		{"unknown field", memAndGate + "colour: blue\n", `unknown field "colour"`},
		{"unknown provider type", strings.Replace(memAndGate, "type: gate", "type: nope", 1), `providers[1].type: unknown "nope"`},
		{"provider construction fails", strings.Replace(memAndGate, "type: gate", "type: broken", 1), "providers[1] (g): connecting to backend"},
		{"resource route added", memAndGate + "- metric: \"*\"\n  provider: mem\n  kind: resource\n", "kind resource was added"},
		{"route to an unknown provider", memAndGate + "- metric: x\n  provider: ghost\n", `unknown provider "ghost"`},
	}
	e := newReloadEnv(t, memAndGate)
	if err := e.rl.reg.Append([]providers.Sample{{Name: "queue_depth", Value: 3}}); err != nil {
		t.Fatal(err)
	}
	before := e.rl.describe()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			failures := counter(t, reloadFailure)
			if got := e.rl.apply([]byte(tc.content), "test"); got != reloadFailed {
				t.Fatalf("apply: %v, want failed", got)
			}
			if d := counter(t, reloadFailure) - failures; d != 1 {
				t.Errorf("failure counter went up by %v, want 1", d)
			}
			if ok, _ := testutil.GetGaugeMetricValue(lastReloadSuccessful); ok != 0 {
				t.Errorf("last_reload_successful = %v after a failure", ok)
			}
			ev := e.lastEvent()
			if !strings.HasPrefix(ev, "Warning ConfigReloadFailed") || !strings.Contains(ev, tc.want) || !strings.Contains(ev, e.file) {
				t.Errorf("event %q, want a Warning naming %s and %q", ev, e.file, tc.want)
			}
			if got := e.rl.describe(); got != before {
				t.Errorf("routes changed to %q", got)
			}
			if v, err := e.value("queue_depth"); err != nil || v != 3 {
				t.Errorf("old config no longer answers: %v %v", v, err)
			}
			if v, err := e.value("gate_a"); err != nil || v != 1 {
				t.Errorf("old gate no longer answers: %v %v", v, err)
			}
			// the same invalid content again is not reported twice
			if got := e.rl.apply([]byte(tc.content), "test"); got != reloadUnchanged {
				t.Errorf("same invalid content again: %v, want unchanged", got)
			}
		})
	}
	if e.gates.count() != 1 {
		t.Errorf("%d gate providers built; refused configs must not leave any", e.gates.count())
	}
}

// TestReloadRefusesUnreadyProvider: a new provider that does not become
// ready is not swapped in (it would fail /readyz and take every metric
// away): the reload is refused and the provider closed.
func TestReloadRefusesUnreadyProvider(t *testing.T) {
	e := newReloadEnv(t, memAndGate)
	e.rl.readyWait = 200 * time.Millisecond
	failures := counter(t, reloadFailure)
	if got := e.rl.apply([]byte(strings.Replace(memAndGate, "{value: 1}", "{value: 2, notReady: true}", 1)), "test"); got != reloadFailed {
		t.Fatalf("apply: %v, want failed", got)
	}
	if d := counter(t, reloadFailure) - failures; d != 1 {
		t.Errorf("failure counter went up by %v, want 1", d)
	}
	if ev := e.lastEvent(); !strings.Contains(ev, `provider "g" is not ready within`) || !strings.Contains(ev, "backend not reachable yet") {
		t.Errorf("event %q, want it to name the unready provider and why", ev)
	}
	unready := e.gates.last()
	select {
	case <-unready.closed:
	default:
		t.Error("the refused provider was not closed")
	}
	if unready.running.Load() != 0 {
		t.Error("the refused provider's loop still runs")
	}
	if v, err := e.value("gate_x"); err != nil || v != 1 {
		t.Errorf("old gate: %v %v, want 1", v, err)
	}
}

// waitFor steps the fake clock past the debounce until cond holds, and
// fails the test if it never does.
func (e *reloadEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("never saw: %s (routes %q)", what, e.rl.describe())
		}
		e.clk.Step(e.rl.debounce)
		time.Sleep(20 * time.Millisecond)
	}
}

// startWatch runs the watch until the test ends and returns once the
// directory is watched.
func (e *reloadEnv) startWatch() {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.rl.watch(ctx)
	}()
	e.t.Cleanup(func() { cancel(); <-done })
	<-e.rl.watchReady
}

// TestWatchKubeletSymlinkSwap: a ConfigMap volume as the kubelet updates it
// (a new timestamped directory, a ..data_tmp symlink renamed over ..data)
// triggers a reload.
func TestWatchKubeletSymlinkSwap(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	ts1 := filepath.Join(mount, "..2026_03_01_12_00_00.000000001")
	mustMkdir(t, ts1)
	mustWrite(t, filepath.Join(ts1, "config.yaml"), memAndGate)
	mustSymlink(t, filepath.Base(ts1), filepath.Join(mount, "..data"))
	mustSymlink(t, "..data/config.yaml", filepath.Join(mount, "config.yaml"))

	e := newReloadEnvAt(t, filepath.Join(mount, "config.yaml"), memAndGate)
	e.startWatch()

	// the kubelet's AtomicWriter: new directory, ..data_tmp, rename, remove the old
	ts2 := filepath.Join(mount, "..2026_03_01_12_01_00.000000002")
	mustMkdir(t, ts2)
	changed := strings.Replace(memAndGate, `"gate_*"`, `"kube_*"`, 1)
	mustWrite(t, filepath.Join(ts2, "config.yaml"), changed)
	mustSymlink(t, filepath.Base(ts2), filepath.Join(mount, "..data_tmp"))
	if err := os.Rename(filepath.Join(mount, "..data_tmp"), filepath.Join(mount, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(ts1); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the route kube_* after the symlink swap", func() bool { return strings.Contains(e.rl.describe(), "kube_*→g") })
	if v, err := e.value("kube_x"); err != nil || v != 1 {
		t.Errorf("kube_x: %v %v", v, err)
	}
}

// TestWatchEditorRename: a file written next to the config and renamed
// over it (what editors and kubectl cp do) triggers a reload.
func TestWatchEditorRename(t *testing.T) {
	t.Parallel()
	e := newReloadEnvAt(t, "", memAndGate)
	e.startWatch()
	e.write(strings.Replace(memAndGate, `"gate_*"`, `"edited_*"`, 1))
	e.waitFor("the route edited_*", func() bool { return strings.Contains(e.rl.describe(), "edited_*→g") })

	// and an in-place write (truncate and write) too
	mustWrite(t, e.file, strings.Replace(memAndGate, `"gate_*"`, `"inplace_*"`, 1))
	e.waitFor("the route inplace_*", func() bool { return strings.Contains(e.rl.describe(), "inplace_*→g") })
}

// TestWatchDebouncesBurst: a burst of writes is one reload, of the last
// content.
func TestWatchDebouncesBurst(t *testing.T) {
	e := newReloadEnv(t, memAndGate)
	e.startWatch()
	success := counter(t, reloadSuccess)
	const n = 5
	for i := range n {
		e.write(strings.Replace(memAndGate, `"gate_*"`, fmt.Sprintf(`"burst%d_*"`, i), 1))
	}
	// every rename has reached the watch before the clock moves
	deadline := time.Now().Add(20 * time.Second)
	for e.rl.eventsFor("config.yaml") < n {
		if time.Now().After(deadline) {
			t.Fatalf("saw %d events for config.yaml, want %d", e.rl.eventsFor("config.yaml"), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	last := fmt.Sprintf("burst%d_*→g", n-1)
	e.waitFor("the last route of the burst", func() bool { return strings.Contains(e.rl.describe(), last) })
	if d := counter(t, reloadSuccess) - success; d != 1 {
		t.Errorf("%v reloads for a burst of %d writes, want 1", d, n)
	}
}

// TestPeriodicCheckCatchesMissedChange: a change the watch does not act on
// (here its debounce never ends; in life an event lost or a directory that
// cannot be watched) is applied by the periodic check.
func TestPeriodicCheckCatchesMissedChange(t *testing.T) {
	t.Parallel()
	e := newReloadEnvAt(t, "", memAndGate)
	e.rl.debounce = 1000 * time.Hour
	e.startWatch()
	mustWrite(t, e.file, strings.Replace(memAndGate, `"gate_*"`, `"periodic_*"`, 1))
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(e.rl.describe(), "periodic_*→g") {
		if time.Now().After(deadline) {
			t.Fatalf("the periodic check never applied the change: %q", e.rl.describe())
		}
		e.clk.Step(e.rl.checkInterval)
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReloadStopsWithoutLeak: stopping the watch and the reloader leaves no
// goroutine behind (the watcher, the providers' loops, the drains).
func TestReloadStopsWithoutLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		e := newReloadEnvAt(t, "", memAndGate)
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.rl.watch(ctx)
		}()
		<-e.rl.watchReady
		// a replaced provider, retired, when the adapter stops
		e.write(strings.Replace(memAndGate, "{value: 1}", "{value: 5}", 1))
		if got := e.rl.reloadFile("test"); got != reloadApplied {
			t.Fatalf("reload: %v", got)
		}
		cancel()
		<-done
		e.rl.stop()
	}()
	deadline := time.Now().Add(20 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after stop, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventually fails the test if cond does not hold within 20s (a bound for
// goroutines to get scheduled, not a timing assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newReloadEnvAt(t *testing.T, file, initial string) *reloadEnv {
	t.Helper()
	e := newReloadEnv(t, initial)
	if file != "" {
		e.file = file
		e.rl.file = file
	}
	return e
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, file, content string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// describe is the running config's routes, "metric→provider".
func (r *reloader) describe() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	for _, rt := range r.cfg.Routes {
		parts = append(parts, rt.Metric+"→"+rt.Provider)
	}
	return strings.Join(parts, " ")
}
