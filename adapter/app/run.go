package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"k8s.io/utils/clock"
	cmmetrics "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver/metrics"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/dynamicmapper"

	"github.com/metricscale/metricscale/adapter/authz"
	"github.com/metricscale/metricscale/adapter/changehub"
	"github.com/metricscale/metricscale/adapter/config"
	"github.com/metricscale/metricscale/adapter/objects"
	"github.com/metricscale/metricscale/adapter/resourcemetrics"
	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/changefeed"
	"github.com/metricscale/metricscale/providers/memory"
	"github.com/metricscale/metricscale/providers/naming"
	"github.com/metricscale/metricscale/providers/push"
	"github.com/metricscale/metricscale/providers/registry"
	"github.com/metricscale/metricscale/providers/telemetry"
)

// Run serves until ctx is done. It reads as the steps of the adapter's
// start, each a function below.
func (o *Options) Run(ctx context.Context) error {
	o.dropInDefaults()
	if err := o.Validate(); err != nil {
		return err
	}
	cfg, cfgData, err := o.loadConfig()
	if err != nil {
		return err
	}
	token, err := o.pushToken()
	if err != nil {
		return err
	}
	cl, err := o.connectCluster(ctx, cfg)
	if err != nil {
		return err
	}
	hub := o.makeChangeHub()
	if hub != nil {
		defer hub.Close()
	}
	rl, reg, err := o.makeProviders(cfg, cfgData, cl, hub)
	if err != nil {
		return err
	}
	defer rl.stop()
	resourceMetrics := o.addMetricsAPIs(reg, cl.lister)
	registerSelfMetrics()
	if err := o.configureServer(reg, hub); err != nil {
		return err
	}
	server, err := o.Server()
	if err != nil {
		return fmt.Errorf("building the API server: %w", err)
	}
	gs := server.GenericAPIServer
	if resourceMetrics != nil {
		if err := addResourceMetricsAPI(gs, reg, cl.lister, resourceMetrics); err != nil {
			return err
		}
	}
	repl, err := o.newReplicator(reg, token)
	if err != nil {
		return err
	}
	if err := gs.AddReadyzChecks(append(readyzChecks(reg, cl.lister, resourceMetrics != nil), replicaChecks(repl)...)...); err != nil {
		return fmt.Errorf("adding readiness checks: %w", err)
	}
	installProviderz(gs.Handler.NonGoRestfulMux, reg)
	if hub != nil {
		addChangeFeed(gs, hub, o.ChangeFeedHeartbeat)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if hub != nil {
		// End the feeds first: the server's shutdown waits for open
		// requests, and a feed never ends by itself.
		go func() {
			<-ctx.Done()
			hub.Close()
		}()
	}
	cl.lister.Start(ctx)
	stopReloads := o.startReloads(ctx, cancel, rl, cl, resourceMetrics != nil)
	defer stopReloads()
	go refreshGauges(ctx, reg)
	return o.serve(ctx, cancel, reg, hub, token, repl)
}

// pushToken reads --push-token-file when the push endpoint is on.
func (o *Options) pushToken() (string, error) {
	if !o.pushEnabled() {
		return "", nil
	}
	return readToken(o.PushTokenFile)
}

// cluster is the adapter's access to the cluster whose objects the metrics
// describe.
type cluster struct {
	// mapper resolves resources through discovery.
	mapper apimeta.RESTMapper
	// config is the client config of the cluster.
	config *rest.Config
	// lister holds the metadata watch caches that resolve label selectors
	// to objects.
	lister *objects.Lister
}

// connectCluster builds the cluster access: discovery for the RESTMapper,
// metadata watches for the objects cfg's selectors name.
func (o *Options) connectCluster(ctx context.Context, cfg *config.Config) (*cluster, error) {
	mapper, err := o.RESTMapper()
	if err != nil {
		return nil, fmt.Errorf("building the RESTMapper from discovery: %w", err)
	}
	// AdapterBase builds a regenerating mapper but never starts its refresh.
	if rm, ok := mapper.(*dynamicmapper.RegeneratingDiscoveryRESTMapper); ok {
		rm.RunUntil(ctx.Done())
	}
	clientConfig, err := o.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("building the client config: %w", err)
	}
	mdClient, err := metadata.NewForConfig(clientConfig)
	if err != nil {
		return nil, fmt.Errorf("building the metadata client: %w", err)
	}
	return &cluster{mapper: mapper, config: clientConfig, lister: objects.New(mdClient, mapper, cfg.SelectorGroupResources()...)}, nil
}

// makeChangeHub makes the change feed's hub (nil without --change-feed):
// the providers that know when a value changes publish to it; GET /changes
// serves it.
func (o *Options) makeChangeHub() *changehub.Hub {
	if !o.ChangeFeed {
		return nil
	}
	hub := changehub.New(changehub.Options{})
	changehub.RegisterMetrics()
	return hub
}

// factories are the provider types, the memory provider's defaults from
// --series-ttl and --max-age.
func (o *Options) factories() map[string]providers.Factory {
	f := Factories()
	f[memory.Type] = memory.Factory{SeriesTTL: o.SeriesTTL, MaxAge: o.MaxAge}
	return f
}

// makeProviders builds the providers of cfg through the reloader, which owns
// them from then on: it runs their loops, applies config changes and closes
// them. hub, if not nil, hears their changes.
func (o *Options) makeProviders(cfg *config.Config, cfgData []byte, cl *cluster, hub *changehub.Hub) (*reloader, *registry.Registry, error) {
	deps := providers.Deps{
		Mapper: cl.mapper, Resources: naming.NewResolver(cl.mapper, clock.RealClock{}), Objects: cl.lister, Clock: clock.RealClock{},
	}
	if hub != nil {
		deps.Changes = hub
	}
	rl := newReloader(o.ConfigFile, o.parseConfig, o.factories(), deps)
	registerReloadMetrics() // before init, which records the first config's hash
	reg, err := rl.init(cfg, cfgData)
	if err != nil {
		return nil, nil, err
	}
	return rl, reg, nil
}

// addMetricsAPIs makes the registry the provider of custom.metrics.k8s.io
// and external.metrics.k8s.io, and returns the provider of metrics.k8s.io,
// served when a route of kind resource exists (nil otherwise). It must run
// before Config(), which decides from them which OpenAPI definitions and API
// groups exist.
func (o *Options) addMetricsAPIs(reg *registry.Registry, lister *objects.Lister) providers.ResourceProvider {
	o.WithCustomMetrics(reg)
	o.WithExternalMetrics(reg)
	_, resourceMetrics := reg.ResourceProvider()
	if resourceMetrics == nil {
		return nil
	}
	// metrics.k8s.io reads the pod and node caches, filled from the start
	// (without it pods are watched from the first Pods query), and needs
	// its OpenAPI definitions before Config().
	lister.WatchPods()
	lister.WatchNodes()
	o.withResourceMetricsOpenAPI()
	return resourceMetrics
}

// registerSelfMetrics registers the adapter's own metrics and
// custom-metrics-apiserver's.
func registerSelfMetrics() {
	telemetry.Register()
	if err := cmmetrics.RegisterMetrics(legacyregistry.Register); err != nil {
		klog.V(2).InfoS("custom-metrics-apiserver metrics already registered", "err", err)
	}
}

// configureServer configures the generic API server: one authenticator for
// the generic chain and the fast path, the fast path and selector
// validation around the chain, and the change feed (hub, if not nil) as a
// long-running request, every answer naming the feed's replica.
func (o *Options) configureServer(reg *registry.Registry, hub *changehub.Hub) error {
	serverConfig, err := o.Config()
	if err != nil {
		return fmt.Errorf("configuring the API server: %w", err)
	}
	gc := serverConfig.GenericConfig
	if gc.Authentication.Authenticator == nil {
		return errors.New("no authenticator configured: refusing to serve anonymously")
	}
	// Request-header (aggregator) answers cached per proxy connection and
	// identity, then the anonymous restriction.
	authn := gc.Authentication.Authenticator
	if o.Authentication != nil {
		authn = cacheCertAuth(authn, gc.Authentication.RequestHeaderConfig, o.Authentication.CacheTTL)
	}
	gc.Authentication.Authenticator = restrictAnonymous(authn, healthPaths)
	// One SubjectAccessReview per reader and cache period for a reader
	// granted every metric, not one per metric read.
	if o.GroupWideAuthorization && gc.Authorization.Authorizer != nil {
		gc.Authorization.Authorizer = authz.GroupWide(gc.Authorization.Authorizer, custom_metrics.GroupName, external_metrics.GroupName)
	}
	buildChain := gc.BuildHandlerChainFunc
	gc.BuildHandlerChainFunc = func(apiHandler http.Handler, c *genericConfig) http.Handler {
		h := o.withFastPath(buildChain(validateSelectors(apiHandler), c), c, reg)
		if hub != nil {
			h = hub.NameReplica(h)
		}
		return h
	}
	if hub != nil {
		gc.LongRunningFunc = withChangeFeedLongRunning(gc.LongRunningFunc)
	}
	return nil
}

// addResourceMetricsAPI installs metrics.k8s.io, served by p.
func addResourceMetricsAPI(gs *genericapiserver.GenericAPIServer, reg *registry.Registry, lister *objects.Lister, p providers.ResourceProvider) error {
	if err := resourcemetrics.Install(gs, reg, lister.Pods(), lister.Nodes()); err != nil {
		return err
	}
	klog.InfoS("Serving metrics.k8s.io", "provider", p.Name())
	return nil
}

// readyzChecks are the readiness checks: every provider ready and, when
// metrics.k8s.io is served, the pod and node watch caches filled. Without
// it pods are watched from the first Pods query, which waits for the cache
// itself: readiness does not wait for a watch that may never start.
func readyzChecks(reg *registry.Registry, lister *objects.Lister, resourceMetrics bool) []healthz.HealthChecker {
	checks := []healthz.HealthChecker{
		healthz.NamedCheck("providers", func(r *http.Request) error { return providersReady(r.Context(), reg) }),
	}
	if resourceMetrics {
		checks = append(checks, healthz.NamedCheck("pod-watch-cache", func(*http.Request) error {
			if !lister.PodsSynced() {
				return errors.New("the pod watch cache is not filled yet")
			}
			return nil
		}), healthz.NamedCheck("node-watch-cache", func(*http.Request) error {
			if !lister.NodesSynced() {
				return errors.New("the node watch cache is not filled yet")
			}
			return nil
		}))
	}
	return checks
}

// replicaChecks keeps a replica unready until it has copied the pushed
// series from a peer (bounded: Ready gives up waiting and says so).
func replicaChecks(repl *push.Replicator) []healthz.HealthChecker {
	if repl == nil {
		return nil
	}
	return []healthz.HealthChecker{healthz.NamedCheck("push-replicas", func(*http.Request) error { return repl.Ready() })}
}

// addChangeFeed serves the change feed behind the server's authentication
// and authorization: the non-resource URL /changes, verb get.
func addChangeFeed(gs *genericapiserver.GenericAPIServer, hub *changehub.Hub, heartbeat time.Duration) {
	gs.Handler.NonGoRestfulMux.Handle(changefeed.Path, &changehub.Handler{Hub: hub, Heartbeat: heartbeat})
}

// startReloads starts the reloader's work: config reloads (watched when
// --config is set), the objects' selectors kept in step, events on the
// adapter's pod. The returned stop, called once ctx's work is to end,
// cancels and waits for the watch.
func (o *Options) startReloads(ctx context.Context, cancel context.CancelFunc, rl *reloader, cl *cluster, resourceServed bool) (stop func()) {
	rl.lister = cl.lister
	rl.resourceServed = resourceServed
	rl.checkInterval = o.ConfigCheckInterval
	events, stopEvents := podEvents(ctx, cl.config)
	rl.events = events
	rl.start(ctx)
	if o.ConfigFile == "" {
		return stopEvents
	}
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		rl.watch(ctx)
	}()
	return func() {
		cancel()
		<-watchDone
		stopEvents()
	}
}

// refreshGauges updates the series and provider-up gauges every 10 s until
// ctx is done.
func refreshGauges(ctx context.Context, reg *registry.Registry) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		reg.UpdateSeriesGauge()
		updateProviderUp(reg)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// serve starts the push endpoint, if on, and the API server, and returns
// when either stops (cancelling the other). When ctx ends, the replica
// stops in order: push endpoint, then the hand-over of its store to the
// peers (push.Replicator.Flush, bounded by flushTimeout), then reads: a
// reader that moves to another replica finds what this one served.
func (o *Options) serve(ctx context.Context, cancel context.CancelFunc, reg *registry.Registry, hub *changehub.Hub, token string, repl *push.Replicator) error {
	apiCtx, stopAPI := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAPI()
	replCtx, stopRepl := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRepl()
	pushErr := make(chan error, 1)
	pushStopped := make(chan struct{})
	if o.pushEnabled() {
		if err := o.startPush(ctx, replCtx, reg, hub, token, repl, pushErr, pushStopped); err != nil {
			return err
		}
	} else {
		close(pushStopped)
	}
	go func() {
		<-ctx.Done()
		<-pushStopped
		if repl != nil {
			fctx, done := context.WithTimeout(context.Background(), flushTimeout)
			if err := repl.Flush(fctx); err != nil {
				klog.ErrorS(err, "Stopping with pushes not yet stored by every peer")
			} else {
				klog.InfoS("Every push taken is stored by the peers; stopping reads")
			}
			done()
		}
		stopRepl()
		stopAPI()
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- o.AdapterBase.Run(apiCtx) }()
	klog.InfoS("Adapter started", "providers", len(reg.Instances()), "securePort", o.CustomMetricsAdapterServerOptions.SecureServing.BindPort, "push", o.pushEnabled(), "changeFeed", hub != nil)
	select {
	case err := <-serveErr:
		return err
	case err := <-pushErr:
		cancel()
		<-serveErr
		return err
	}
}

func (o *Options) pushEnabled() bool { return o.PushPort != 0 || o.pushListener != nil }

func providersReady(ctx context.Context, reg *registry.Registry) error {
	var errs []error
	for _, in := range reg.Instances() {
		if rc, ok := in.Provider.(providers.ReadinessChecker); ok {
			cctx, cancel := context.WithTimeout(ctx, in.Timeout)
			err := rc.Ready(cctx)
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("provider %q: %w", in.Provider.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// flushTimeout bounds a stopping replica's wait for its forwards.
const flushTimeout = 5 * time.Second

// startPush listens on the push address and serves until ctx is done,
// then closes stopped; serving errors go to errc. The replicator runs
// until replCtx is done.
func (o *Options) startPush(ctx, replCtx context.Context, reg *registry.Registry, hub *changehub.Hub, token string, repl *push.Replicator, errc chan<- error, stopped chan<- struct{}) error {
	h, err := push.NewHandler(reg, token, o.PushMaxBodyBytes)
	if err != nil {
		return err
	}
	h.OnAppend = reg.UpdateSeriesGauge
	h.MaxInflight = o.PushMaxInflight
	if repl != nil {
		h.Replicator = repl
		klog.InfoS("Replicating pushes to the other replicas", "peersDNS", o.PushPeersDNS, "peers", o.PushPeers, "self", o.PushSelfIP, "replica", repl.ID())
		if hub != nil {
			// A push's changes reach the feed once the other replicas
			// store it too: a subscriber reacting to a change may read the
			// metric from any replica.
			h.Hold = hub.Hold
		}
	}
	ln := o.pushListener
	if ln == nil {
		addr := net.JoinHostPort(o.PushBindAddress, strconv.Itoa(o.PushPort))
		if ln, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("push endpoint: listening on %s: %w", addr, err)
		}
	}
	srv := &http.Server{
		Handler:           h.Mux(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	tlsOn := o.PushTLSCertFile != ""
	if tlsOn {
		cert, err := tls.LoadX509KeyPair(o.PushTLSCertFile, o.PushTLSKeyFile)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("push endpoint: loading %s: %w", o.PushTLSCertFile, err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	go func() {
		var err error
		if tlsOn {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("push endpoint on %s: %w", ln.Addr(), err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		close(stopped)
	}()
	klog.InfoS("Push endpoint listening", "address", ln.Addr().String(), "tls", tlsOn)
	if repl != nil {
		repl.Start(replCtx) // once listening: it recognises itself in the peer list
	}
	return nil
}

// newReplicator returns the push replication of --push-peers or
// --push-peers-dns, or nil without either.
func (o *Options) newReplicator(reg *registry.Registry, token string) (*push.Replicator, error) {
	var peers push.Peers
	advertise := "" // a static list names every replica from the start
	switch {
	case !o.pushEnabled():
		return nil, nil
	case o.PushPeers != "":
		static, err := push.ParseStaticPeers(o.PushPeers)
		if err != nil {
			return nil, err
		}
		peers = static
	case o.PushPeersDNS != "":
		port := o.PushPort
		if port == 0 && o.pushListener != nil {
			port = o.pushListener.Addr().(*net.TCPAddr).Port
		}
		peers = &push.DNSPeers{Host: o.PushPeersDNS, Port: port, SelfIP: o.PushSelfIP}
		advertise = net.JoinHostPort(o.PushSelfIP, strconv.Itoa(port))
	default:
		return nil, nil
	}
	stores := func() []*memory.Store {
		var out []*memory.Store
		for _, in := range reg.Instances() {
			if p, ok := in.Provider.(interface{ Store() *memory.Store }); ok {
				out = append(out, p.Store())
			}
		}
		return out
	}
	repl := push.NewReplicator(peers, token, reg, push.StoreSource(stores))
	repl.Advertise = advertise
	return repl, nil
}

// withChangeFeedLongRunning makes the change feed a long-running request, as
// a watch is: no request timeout, and not counted against the in-flight
// limit of short requests.
func withChangeFeedLongRunning(inner apirequest.LongRunningRequestCheck) apirequest.LongRunningRequestCheck {
	return func(r *http.Request, ri *apirequest.RequestInfo) bool {
		if ri != nil && !ri.IsResourceRequest && ri.Path == changefeed.Path {
			return true
		}
		return inner != nil && inner(r, ri)
	}
}
