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

	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/metadata"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	cmmetrics "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver/metrics"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/dynamicmapper"

	"github.com/metricscale/metricscale/adapter/changefeed"
	"github.com/metricscale/metricscale/adapter/changehub"
	"github.com/metricscale/metricscale/adapter/objects"
	"github.com/metricscale/metricscale/adapter/resourcemetrics"
	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/memory"
	"github.com/metricscale/metricscale/providers/naming"
	"github.com/metricscale/metricscale/providers/push"
	"github.com/metricscale/metricscale/providers/registry"
	"github.com/metricscale/metricscale/providers/telemetry"
)

// Run serves until ctx is done.
func (o *Options) Run(ctx context.Context) error {
	o.dropInDefaults()
	if err := o.Validate(); err != nil {
		return err
	}
	cfg, cfgData, err := o.loadConfig()
	if err != nil {
		return err
	}
	var token string
	if o.pushEnabled() {
		if token, err = readToken(o.PushTokenFile); err != nil {
			return err
		}
	}

	// Cluster access: discovery for the RESTMapper, metadata watches.
	mapper, err := o.RESTMapper()
	if err != nil {
		return fmt.Errorf("building the RESTMapper from discovery: %w", err)
	}
	// AdapterBase builds a regenerating mapper but never starts its refresh.
	if rm, ok := mapper.(*dynamicmapper.RegeneratingDiscoveryRESTMapper); ok {
		rm.RunUntil(ctx.Done())
	}
	clientConfig, err := o.ClientConfig()
	if err != nil {
		return fmt.Errorf("building the client config: %w", err)
	}
	mdClient, err := metadata.NewForConfig(clientConfig)
	if err != nil {
		return fmt.Errorf("building the metadata client: %w", err)
	}
	lister := objects.New(mdClient, mapper, cfg.SelectorGroupResources()...)

	// The change feed's hub: the providers that know when a value changes
	// publish to it; GET /changes serves it.
	var hub *changehub.Hub
	deps := providers.Deps{
		Mapper: mapper, Resources: naming.NewResolver(mapper, clock.RealClock{}), Objects: lister, Clock: clock.RealClock{},
		SeriesTTL: o.SeriesTTL, MaxAge: o.MaxAge,
	}
	if o.ChangeFeed {
		hub = changehub.New(changehub.Options{})
		defer hub.Close()
		deps.Changes = hub
		changehub.RegisterMetrics()
	}

	// The reloader owns the providers: it builds them, runs their loops,
	// applies config changes and closes them.
	rl := newReloader(o.ConfigFile, o.parseConfig, Factories(), deps)
	registerReloadMetrics() // before init, which records the first config's hash
	reg, err := rl.init(cfg, cfgData)
	if err != nil {
		return err
	}
	defer rl.stop()

	// Providers must be installed before Config(): it decides which OpenAPI
	// definitions and API groups exist from them.
	o.WithCustomMetrics(reg)
	o.WithExternalMetrics(reg)
	// metrics.k8s.io is served when a route of kind resource exists; it needs
	// a node cache, and its OpenAPI definitions before Config().
	_, resourceMetrics := reg.ResourceProvider()
	serveResourceMetrics := resourceMetrics != nil
	if serveResourceMetrics {
		lister.WatchNodes()
		o.withResourceMetricsOpenAPI()
	}

	telemetry.Register()
	if err := cmmetrics.RegisterMetrics(legacyregistry.Register); err != nil {
		klog.V(2).InfoS("custom-metrics-apiserver metrics already registered", "err", err)
	}

	serverConfig, err := o.Config()
	if err != nil {
		return fmt.Errorf("configuring the API server: %w", err)
	}
	gc := serverConfig.GenericConfig
	if gc.Authentication.Authenticator == nil {
		return errors.New("no authenticator configured: refusing to serve anonymously")
	}
	// One authenticator for the generic chain and the fast path: request-header
	// (aggregator) answers cached per proxy connection and identity, then
	// the anonymous restriction.
	authn := gc.Authentication.Authenticator
	if o.Authentication != nil {
		authn = cacheCertAuth(authn, gc.Authentication.RequestHeaderConfig, o.Authentication.CacheTTL)
	}
	gc.Authentication.Authenticator = restrictAnonymous(authn, healthPaths)
	buildChain := gc.BuildHandlerChainFunc
	gc.BuildHandlerChainFunc = func(apiHandler http.Handler, c *genericConfig) http.Handler {
		return o.withFastPath(buildChain(validateSelectors(apiHandler), c), c, reg)
	}
	if hub != nil {
		gc.LongRunningFunc = withChangeFeedLongRunning(gc.LongRunningFunc)
	}

	server, err := o.Server()
	if err != nil {
		return fmt.Errorf("building the API server: %w", err)
	}
	checks := []healthz.HealthChecker{
		healthz.NamedCheck("pod-watch-cache", func(*http.Request) error {
			if !lister.PodsSynced() {
				return errors.New("the pod watch cache is not filled yet")
			}
			return nil
		}),
		healthz.NamedCheck("providers", func(r *http.Request) error { return providersReady(r.Context(), reg) }),
	}
	if serveResourceMetrics {
		if err := resourcemetrics.Install(server.GenericAPIServer, reg, lister.Pods(), lister.Nodes()); err != nil {
			return err
		}
		checks = append(checks, healthz.NamedCheck("node-watch-cache", func(*http.Request) error {
			if !lister.NodesSynced() {
				return errors.New("the node watch cache is not filled yet")
			}
			return nil
		}))
		klog.InfoS("Serving metrics.k8s.io", "provider", resourceMetrics.Name())
	}
	repl, err := o.newReplicator(reg, token)
	if err != nil {
		return err
	}
	if repl != nil {
		// not ready before the pushed series are copied from a peer
		checks = append(checks, healthz.NamedCheck("push-replicas", func(*http.Request) error { return repl.Ready() }))
	}
	if err := server.GenericAPIServer.AddReadyzChecks(checks...); err != nil {
		return fmt.Errorf("adding readiness checks: %w", err)
	}
	installProviderz(server.GenericAPIServer.Handler.NonGoRestfulMux, reg)
	if hub != nil {
		// Behind the server's authentication and authorization: the
		// non-resource URL /changes, verb get.
		server.GenericAPIServer.Handler.NonGoRestfulMux.Handle(changefeed.Path, &changehub.Handler{Hub: hub, Heartbeat: o.ChangeFeedHeartbeat})
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
	lister.Start(ctx)
	rl.lister = lister
	rl.resourceServed = serveResourceMetrics
	rl.checkInterval = o.ConfigCheckInterval
	events, stopEvents := podEvents(ctx, clientConfig)
	defer stopEvents()
	rl.events = events
	rl.start(ctx)
	if o.ConfigFile != "" {
		watchDone := make(chan struct{})
		go func() {
			defer close(watchDone)
			rl.watch(ctx)
		}()
		defer func() { cancel(); <-watchDone }()
	}
	go func() {
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
	}()

	pushErr := make(chan error, 1)
	if o.pushEnabled() {
		if err := o.startPush(ctx, reg, hub, token, repl, pushErr); err != nil {
			return err
		}
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- o.AdapterBase.Run(ctx) }()
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

// startPush listens on the push address and serves until ctx is done;
// serving errors go to errc.
func (o *Options) startPush(ctx context.Context, reg *registry.Registry, hub *changehub.Hub, token string, repl *push.Replicator, errc chan<- error) error {
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
	}()
	klog.InfoS("Push endpoint listening", "address", ln.Addr().String(), "tls", tlsOn)
	if repl != nil {
		repl.Start(ctx) // once listening: it recognises itself in the peer list
	}
	return nil
}

// newReplicator returns the push replication of --push-peers or
// --push-peers-dns, or nil without either.
func (o *Options) newReplicator(reg *registry.Registry, token string) (*push.Replicator, error) {
	var peers push.Peers
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
	return push.NewReplicator(peers, token, reg, push.StoreSource(stores)), nil
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
