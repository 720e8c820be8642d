package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/adapter/config"
	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/registry"
	"github.com/metricscale/metricscale/providers/telemetry"
)

// Reload defaults.
const (
	// DefaultConfigCheckInterval is how often the config file's content is
	// hashed as a safety net for missed watch events (--config-check-interval).
	DefaultConfigCheckInterval = time.Minute
	// configDebounce is how long the watch waits after the last event of a
	// burst (an editor's write and rename, the kubelet's symlink swap).
	configDebounce = time.Second
	// providerReadyWait bounds how long a new provider may take to become
	// ready (a Prometheus provider's first relist) before the reload is
	// refused: swapping in an unready provider would fail /readyz and take
	// every metric of the adapter away.
	providerReadyWait = 30 * time.Second
	// drainGrace is added to a retired provider's timeout before it is closed
	// even though a call still runs on it: by then the registry has answered
	// that call's query (503 at the timeout), only the provider's own
	// goroutine, ignoring its context, is left.
	drainGrace = 30 * time.Second
	// stopWait bounds stop: a provider whose Runner ignores its context or
	// whose Close hangs is left behind (and logged) rather than holding the
	// adapter's shutdown until the kubelet's SIGKILL.
	stopWait = 10 * time.Second
)

// Reload results, the label values of metricscale_adapter_config_reloads_total.
const (
	reloadSuccess = "success"
	reloadFailure = "failure"
)

// eventFunc emits an event on the adapter's pod; nil when the pod is not
// known (not run in a pod, or no POD_NAME/POD_NAMESPACE).
type eventFunc func(eventtype, reason, message string)

// selectorSetter is the object lister's SetAllowed.
type selectorSetter interface {
	SetAllowed(allowed ...schema.GroupResource)
}

// reloader owns the running providers: it builds them at start, starts
// their background loops, applies config changes (watching the file) and
// closes them.
type reloader struct {
	file      string
	parse     func([]byte) (*config.Config, error)
	factories map[string]providers.Factory
	deps      providers.Deps

	// Set before start.
	lister         selectorSetter
	events         eventFunc
	resourceServed bool
	checkInterval  time.Duration
	debounce       time.Duration
	readyWait      time.Duration
	stopWait       time.Duration
	clock          clock.WithTicker

	reg *registry.Registry

	// applyMu serializes reloads. A reload builds its providers (which may
	// read secrets and dial backends) holding applyMu only, never mu, so
	// stop is not held up by a slow build.
	applyMu sync.Mutex

	mu       sync.Mutex      // guards the fields below; held briefly, never across a build
	ctx      context.Context // the providers' loops and drains; ends at stop
	cancel   context.CancelFunc
	cfg      *config.Config
	hash     string // of the config in use
	lastSeen string // of the last content tried, applied or not
	running  map[string]*running
	stopped  bool

	wg sync.WaitGroup // runners and drains

	// watchEvents counts the watch's events per file name, and watchReady
	// is closed once the watch is set up and its start reload done (tests).
	eventsMu    sync.Mutex
	watchEvents map[string]int
	watchReady  chan struct{}
}

// running is one provider in service.
type running struct {
	cfg  config.Provider
	inst *registry.Instance
	stop context.CancelFunc // its Runner's; nil if it has none or none started
	done chan struct{}      // closed when its Runner returned
}

func newReloader(file string, parse func([]byte) (*config.Config, error), factories map[string]providers.Factory, deps providers.Deps) *reloader {
	return &reloader{
		file: file, parse: parse, factories: factories, deps: deps,
		checkInterval: DefaultConfigCheckInterval, debounce: configDebounce, readyWait: providerReadyWait, stopWait: stopWait,
		clock: clock.RealClock{}, running: map[string]*running{}, watchEvents: map[string]int{},
		watchReady: make(chan struct{}),
	}
}

func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// init builds the providers and the registry of the first config; data is
// the file's content (nil without --config).
func (r *reloader) init(cfg *config.Config, data []byte) (*registry.Registry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next, fresh, err := r.build(cfg)
	if err != nil {
		return nil, err
	}
	reg, err := registry.New(instancesOf(cfg, next), routesOf(cfg), r.deps.Resources, cfg.Discovery.MaxMetrics, r.deps.Clock)
	if err != nil {
		closeAll(fresh)
		return nil, err
	}
	r.reg, r.cfg, r.running = reg, cfg, next
	r.hash = hashOf(data)
	r.lastSeen = r.hash
	setConfigInfo(r.hash, r.clock.Now())
	lastReloadSuccessful.Set(1)
	return reg, nil
}

// start starts the background loops of the providers; they stop with ctx
// or stop.
func (r *reloader) start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctx, r.cancel = context.WithCancel(ctx)
	for _, name := range r.names() {
		r.startRunner(r.running[name])
	}
}

// names are the running providers' names in config order.
func (r *reloader) names() []string {
	var out []string
	for _, p := range r.cfg.Providers {
		if r.running[p.Name] != nil {
			out = append(out, p.Name)
		}
	}
	return out
}

func (r *reloader) startRunner(rp *running) {
	rp.done = make(chan struct{})
	run, ok := rp.inst.Provider.(providers.Runner)
	if !ok {
		close(rp.done)
		return
	}
	ctx, cancel := context.WithCancel(r.ctx)
	rp.stop = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(rp.done)
		run.Run(ctx)
	}()
}

// halt stops rp's Runner and closes its provider.
func halt(rp *running) {
	if rp.stop != nil {
		rp.stop()
		<-rp.done
	}
	if c, ok := rp.inst.Provider.(io.Closer); ok {
		if err := c.Close(); err != nil {
			klog.ErrorS(err, "Closing provider", "provider", rp.cfg.Name)
		}
	}
}

func closeAll(rps []*running) {
	for _, rp := range rps {
		halt(rp)
	}
}

// stop stops every provider, retired ones still draining included, and
// waits for their loops, at most stopWait: what is still running then is
// logged and left to the process' exit. A reload in progress does not hold
// it up: it finds the reloader stopped and closes what it built.
func (r *reloader) stop() {
	// Cancel first: a reload waiting for a new provider's readiness gives
	// up when the context ends. (cancel is set once by start, which runs
	// before stop.)
	if r.cancel != nil {
		r.cancel() // drains close their providers now
	}
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	current := make([]*running, 0, len(r.running))
	for _, name := range r.names() {
		current = append(current, r.running[name])
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		closeAll(current)
		r.wg.Wait()
	}()
	t := time.NewTimer(r.stopWait) // real time: a fake clock must not hold shutdown
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		klog.InfoS("Stopping: providers still running after the stop wait; leaving them to the exit", "wait", r.stopWait)
	}
}

// sameProvider tells whether a provider's config section is unchanged but
// for its timeout: same name, type and options (compared as JSON values, so
// formatting does not count).
func sameProvider(a, b config.Provider) bool {
	if a.Name != b.Name || a.Type != b.Type {
		return false
	}
	return jsonEqual(a.Options, b.Options)
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return string(a) == string(b)
	}
	return reflect.DeepEqual(va, vb)
}

// build returns the providers of cfg by name: the running ones whose config
// is unchanged, kept (a changed timeout only gets a new Instance of the same
// provider), and new instances for the others, which are also returned as
// fresh. On error nothing is left built.
func (r *reloader) build(cfg *config.Config) (next map[string]*running, fresh []*running, err error) {
	next = map[string]*running{}
	for i, pc := range cfg.Providers {
		if old := r.running[pc.Name]; old != nil && sameProvider(old.cfg, pc) {
			kept := *old
			kept.cfg = pc
			if pc.Timeout.Duration != old.cfg.Timeout.Duration {
				kept.inst = old.inst.WithTimeout(pc.Timeout.Duration)
			}
			next[pc.Name] = &kept
			continue
		}
		f, ok := r.factories[pc.Type]
		if !ok {
			closeAll(fresh)
			return nil, nil, fmt.Errorf("providers[%d].type: unknown %q", i, pc.Type)
		}
		p, err := f.New(pc.Name, pc.Options, r.deps)
		if err != nil {
			closeAll(fresh)
			return nil, nil, fmt.Errorf("providers[%d] (%s): %w", i, pc.Name, err)
		}
		rp := &running{cfg: pc, inst: &registry.Instance{Provider: p, Timeout: pc.Timeout.Duration}}
		next[pc.Name] = rp
		fresh = append(fresh, rp)
		klog.InfoS("Provider configured", "name", pc.Name, "type", pc.Type, "timeout", pc.Timeout.Duration)
	}
	return next, fresh, nil
}

func instancesOf(cfg *config.Config, byName map[string]*running) []*registry.Instance {
	out := make([]*registry.Instance, 0, len(cfg.Providers))
	for _, pc := range cfg.Providers {
		out = append(out, byName[pc.Name].inst)
	}
	return out
}

func routesOf(cfg *config.Config) []registry.Route {
	out := make([]registry.Route, 0, len(cfg.Routes))
	for _, rt := range cfg.Routes {
		out = append(out, registry.Route{Metric: rt.Metric, Provider: rt.Provider, Kind: rt.Kind})
	}
	return out
}

func hasResourceRoute(cfg *config.Config) bool {
	for _, rt := range cfg.Routes {
		if rt.Kind == config.KindResource {
			return true
		}
	}
	return false
}

// needsRestart names what in next cannot be applied to a running adapter.
func (r *reloader) needsRestart(next *config.Config) error {
	if has := hasResourceRoute(next); has != r.resourceServed {
		if has {
			return errors.New("routes: a route of kind resource was added (in a prometheus-adapter rules file: resourceRules): metrics.k8s.io is installed (with the node watch and its OpenAPI) only at start; restart the adapter to serve it")
		}
		return errors.New("routes: the route of kind resource was removed: metrics.k8s.io stays installed until a restart; restart the adapter to stop serving it (changing which provider serves it applies live)")
	}
	return nil
}

// reloadOutcome is what reloadFile did.
type reloadOutcome int

const (
	reloadUnchanged reloadOutcome = iota // same content as the last one tried
	reloadApplied
	reloadFailed
)

// reloadFile reads the config file and applies it if its content changed
// since the last one tried (applied or refused: an invalid file is reported
// once, not at every check).
func (r *reloader) reloadFile(trigger string) reloadOutcome {
	data, err := os.ReadFile(r.file)
	if err != nil {
		// A file being replaced is briefly missing for some tools; the next
		// event or check reads it again. Reported like a refused change.
		if errors.Is(err, os.ErrNotExist) {
			klog.V(2).InfoS("Config file missing; keeping the running config", "config", r.file, "trigger", trigger)
			return reloadUnchanged
		}
		r.applyMu.Lock()
		defer r.applyMu.Unlock()
		return r.refuse(fmt.Errorf("reading config %s: %w", r.file, err), "")
	}
	return r.apply(data, trigger)
}

// apply validates data exactly as the adapter does at start, builds the
// providers that changed, and swaps routes and providers at once. Anything
// wrong keeps the running config whole. The build and the readiness wait
// run without mu, so stop never waits on a provider's New (a secret read,
// a dial); if stop came meanwhile, what was built is closed.
func (r *reloader) apply(data []byte, trigger string) reloadOutcome {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return reloadUnchanged
	}
	hash := hashOf(data)
	if hash == r.lastSeen {
		r.mu.Unlock()
		return reloadUnchanged
	}
	r.lastSeen = hash
	r.mu.Unlock()
	klog.InfoS("Config file changed; reloading", "config", r.file, "hash", hash, "trigger", trigger)

	cfg, err := r.parse(data)
	if err != nil {
		return r.refuse(fmt.Errorf("config %s: %w", r.file, err), hash)
	}
	if err := r.needsRestart(cfg); err != nil {
		return r.refuse(fmt.Errorf("config %s: %w", r.file, err), hash)
	}
	// r.running changes only under applyMu, which this reload holds.
	next, fresh, err := r.build(cfg)
	if err != nil {
		return r.refuse(fmt.Errorf("config %s: %w", r.file, err), hash)
	}
	if !r.startAll(fresh) {
		closeAll(fresh)
		return reloadUnchanged
	}
	if err := r.waitReady(fresh); err != nil {
		closeAll(fresh)
		return r.refuse(fmt.Errorf("config %s: %w", r.file, err), hash)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		closeAll(fresh)
		return reloadUnchanged
	}
	retired, err := r.reg.Swap(instancesOf(cfg, next), routesOf(cfg), cfg.Discovery.MaxMetrics)
	if err != nil {
		closeAll(fresh)
		return r.refuse(fmt.Errorf("config %s: %w", r.file, err), hash)
	}
	if r.lister != nil {
		r.lister.SetAllowed(cfg.SelectorGroupResources()...)
	}

	kept, added, removed := r.retire(cfg, next, retired)
	r.cfg, r.running, r.hash = cfg, next, hash
	now := r.clock.Now()
	setConfigInfo(hash, now)
	reloadsTotal.WithLabelValues(reloadSuccess).Inc()
	lastReloadSuccessful.Set(1)
	klog.InfoS("Config reloaded", "config", r.file, "hash", hash, "generation", r.reg.Generation(),
		"kept", kept, "new", added, "retired", removed, "routes", len(cfg.Routes))
	r.event(corev1.EventTypeNormal, "ConfigReloaded", fmt.Sprintf("config %s reloaded (%s): providers kept %v, new %v, retired %v; %d routes",
		r.file, shortHash(hash), kept, added, removed, len(cfg.Routes)))
	return reloadApplied
}

// retire drains the providers the swap retired (closed once their in-flight
// calls returned) and names the providers kept, added and removed. Called
// with r.mu held, before r.running becomes next.
func (r *reloader) retire(cfg *config.Config, next map[string]*running, retired []*registry.Instance) (kept, added, removed []string) {
	prev := r.running
	byInst := map[*registry.Instance]*running{}
	for _, rp := range prev {
		byInst[rp.inst] = rp
	}
	for _, pc := range cfg.Providers {
		if old := prev[pc.Name]; old != nil && next[pc.Name].done == old.done {
			kept = append(kept, pc.Name)
		} else {
			added = append(added, pc.Name)
		}
	}
	for _, in := range retired {
		rp := byInst[in]
		if rp == nil {
			continue // cannot happen: every retired instance was running
		}
		removed = append(removed, rp.cfg.Name)
		r.drain(rp, next[rp.cfg.Name] == nil)
	}
	return kept, added, removed
}

// startAll starts the Runners of fresh providers, unless the reloader
// stopped (false): stop's wait must see every Runner it has to wait for.
func (r *reloader) startAll(fresh []*running) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return false
	}
	for _, rp := range fresh {
		r.startRunner(rp)
	}
	return true
}

// drain closes rp once no call runs on it (or its timeout plus drainGrace
// passed, or the adapter stops); gone tells that no provider of its name
// remains, whose per-provider series are then dropped.
func (r *reloader) drain(rp *running, gone bool) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := r.clock.NewTimer(rp.inst.Timeout + drainGrace)
		defer t.Stop()
		select {
		case <-rp.inst.Drained():
		case <-t.C():
			klog.InfoS("Closing a retired provider with a call still running past its timeout", "provider", rp.cfg.Name, "inflight", rp.inst.Inflight())
		case <-r.ctx.Done():
		}
		halt(rp)
		if gone {
			telemetry.Series.DeleteLabelValues(rp.cfg.Name)
			telemetry.ProviderUp.DeleteLabelValues(rp.cfg.Name)
		}
		klog.V(2).InfoS("Retired provider closed", "provider", rp.cfg.Name)
	}()
}

// waitReady waits until each fresh provider that can tell is ready, at
// most readyWait in all.
func (r *reloader) waitReady(fresh []*running) error {
	ctx, cancel := context.WithTimeout(r.ctx, r.readyWait)
	defer cancel()
	for _, rp := range fresh {
		rc, ok := rp.inst.Provider.(providers.ReadinessChecker)
		if !ok {
			continue
		}
		for {
			err := rc.Ready(ctx)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("provider %q is not ready within %s: %w", rp.cfg.Name, r.readyWait, err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// refuse reports a reload that keeps the running config.
func (r *reloader) refuse(err error, hash string) reloadOutcome {
	reloadsTotal.WithLabelValues(reloadFailure).Inc()
	lastReloadSuccessful.Set(0)
	klog.ErrorS(err, "Config reload failed; keeping the running config", "config", r.file, "hash", hash, "running", r.hash)
	msg := err.Error()
	if len(msg) > 900 {
		msg = msg[:900] + "…"
	}
	r.event(corev1.EventTypeWarning, "ConfigReloadFailed", msg+"; keeping the running config ("+shortHash(r.hash)+")")
	return reloadFailed
}

func (r *reloader) event(eventtype, reason, message string) {
	if r.events != nil {
		r.events(eventtype, reason, message)
	}
}

func shortHash(h string) string {
	if len(h) > len("sha256:")+12 {
		return h[:len("sha256:")+12]
	}
	return h
}

// watch reloads the config when its directory changes (debounced) and
// every checkInterval, until ctx is done. It watches the directory, not the
// file: a ConfigMap volume swaps its ..data symlink and editors rename a new
// file over the old one, both of which a watch on the file's inode misses.
// If the directory cannot be watched (no inotify instance left), the
// periodic check alone reloads.
func (r *reloader) watch(ctx context.Context) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	dir := filepath.Dir(r.file)
	w, err := fsnotify.NewWatcher()
	if err == nil {
		defer w.Close()
		if err = w.Add(dir); err == nil {
			events, errs = w.Events, w.Errors
		}
	}
	if err != nil {
		klog.ErrorS(err, "Cannot watch the config directory; changes are seen by the periodic check only", "directory", dir, "checkInterval", r.checkInterval)
	}
	var tick <-chan time.Time
	if r.checkInterval > 0 {
		t := r.clock.NewTicker(r.checkInterval)
		defer t.Stop()
		tick = t.C()
	}
	debounce := r.clock.NewTimer(r.debounce)
	debounce.Stop()
	defer debounce.Stop()
	klog.InfoS("Watching the config for changes", "config", r.file, "directory", dir, "checkInterval", r.checkInterval)
	// The file may have changed between its first read and the watch.
	r.reloadFile("start")
	// After the start reload: a test that writes once this is closed must
	// not see that reload pick up its write (a second reload for one burst).
	close(r.watchReady)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Op != fsnotify.Chmod {
				klog.V(4).InfoS("Config directory event", "name", ev.Name, "op", ev.Op.String())
				debounce.Reset(r.debounce)
			}
			// Counted once acted on: a test that saw the count may step the clock
			// (counted before the Reset, a burst was split in two reloads).
			r.eventsMu.Lock()
			r.watchEvents[filepath.Base(ev.Name)]++
			r.eventsMu.Unlock()
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			klog.ErrorS(err, "Watching the config directory; the periodic check still runs", "directory", dir)
		case <-debounce.C():
			r.reloadFile("watch")
		case <-tick:
			r.reloadFile("periodic")
		}
	}
}

// eventsFor is how many watch events named base (tests).
func (r *reloader) eventsFor(base string) int {
	r.eventsMu.Lock()
	defer r.eventsMu.Unlock()
	return r.watchEvents[base]
}
