// Package app builds the autoscaler controller from flags: clients,
// informers, leader election and the metrics/health endpoints.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	componentbaseconfig "k8s.io/component-base/config"
	componentbaseoptions "k8s.io/component-base/config/options"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	// Registers client-go's request and workqueue metrics, as kube-controller-manager does.
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	"k8s.io/klog/v2"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/controller"
	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/defaults"
	"github.com/metricscale/metricscale/autoscaler/maclient"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
	mrecord "github.com/metricscale/metricscale/autoscaler/record"
	"github.com/metricscale/metricscale/autoscaler/recordserver"
	"github.com/metricscale/metricscale/autoscaler/secureserve"
)

// The kube-controller-manager feature gates the decisions read, with
// their v1.37 defaults (decision.KubeVersion137.GateSpecs):
// HPAConfigurableTolerance is GA and locked on, HPAScaleToZero beta and on.
const (
	GateConfigurableTolerance featuregate.Feature = decision.GateConfigurableTolerance
	GateScaleToZero           featuregate.Feature = decision.GateScaleToZero
	GatePodLevelResources     featuregate.Feature = decision.GatePodLevelResources
	GateGeneration            featuregate.Feature = decision.GateGeneration
)

var hpaGates = func() map[featuregate.Feature]featuregate.FeatureSpec {
	out := map[featuregate.Feature]featuregate.FeatureSpec{}
	for name, g := range decision.DefaultKubeVersion.GateSpecs() {
		spec := featuregate.FeatureSpec{Default: g.Default, LockToDefault: g.Locked, PreRelease: featuregate.Beta}
		switch g.Stage {
		case "Alpha":
			spec.PreRelease = featuregate.Alpha
		case "GA":
			spec.PreRelease = featuregate.GA
		}
		out[featuregate.Feature(name)] = spec
	}
	return out
}()

// Options are the controller's command-line settings.
type Options struct {
	Kubeconfig         string
	KubeAPIQPS         float32
	KubeAPIBurst       int
	KubeAPIContentType string
	KubeAPICompression bool
	// MetricsAPIQPS and MetricsAPIBurst rate-limit the reads of the
	// metrics APIs apart from the rest, so that a pass over many
	// autoscalers is not held by the scale and status requests' limit.
	MetricsAPIQPS   float32
	MetricsAPIBurst int
	// MetricReadTimeout bounds one reconcile's metric reads (never more
	// than the object's sync period).
	MetricReadTimeout time.Duration
	Workers           int
	HPAObjects        bool
	HPASyncPeriod     time.Duration
	HistorySync       time.Duration
	BindAddress       string
	// InsecureMetrics serves BindAddress over plain HTTP, without
	// authentication or authorization.
	InsecureMetrics bool
	Profiling       bool
	LeaderElection  componentbaseconfig.LeaderElectionConfiguration
	Identity        string
	Tolerance       float64
	CPUInitPeriod   time.Duration
	ReadinessDelay  time.Duration
	DownscaleWindow time.Duration
	// ChangeFeed is the adapter's change feed, off without a URL.
	ChangeFeed ChangeFeedOptions
	// Gates holds the HPA gates and the logging ones.
	Gates   featuregate.MutableFeatureGate
	Logging *logsapi.LoggingConfiguration
	// Record keeps the inputs and decisions of the last reconciles of
	// every MetricAutoscaler, bounded by RecordOptions, and serves them
	// over HTTPS on RecordServer (delegated authentication and
	// authorization) for `autoscaler record`.
	Record        bool
	RecordOptions mrecord.Options
	RecordServer  recordserver.Options
	// Webhook is the MetricAutoscalers' validating admission webhook.
	Webhook WebhookOptions
}

// NewOptions returns kube-controller-manager's defaults where they apply.
// Workers is not one: a reconcile is one metrics read through the
// aggregator (~10 ms), so its 5 workers would cap a controller at about
// 500 reconciles a second, below the 667 that 10,000 autoscalers at 15 s need.
func NewOptions() *Options {
	d := decision.DefaultSettings()
	host, _ := os.Hostname()
	gates := featuregate.NewFeatureGate()
	utilruntime.Must(gates.Add(hpaGates))
	utilruntime.Must(logsapi.AddFeatureGates(gates))
	return &Options{
		KubeAPIQPS: 100, KubeAPIBurst: 200, KubeAPIContentType: runtime.ContentTypeProtobuf,
		MetricsAPIQPS: 1000, MetricsAPIBurst: 2000, MetricReadTimeout: controller.DefaultMetricReadTimeout,
		Workers: 20, HPASyncPeriod: defaults.SyncPeriod, HistorySync: 5 * time.Minute,
		// Loopback by default, as before it was secured; the manifests
		// serve it on the pod IP.
		BindAddress: "127.0.0.1:8080",
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect: true, ResourceLock: resourcelock.LeasesResourceLock,
			ResourceNamespace: "metricscale", ResourceName: "metricscale-autoscaler",
			LeaseDuration: metav1.Duration{Duration: 15 * time.Second}, RenewDeadline: metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod: metav1.Duration{Duration: 2 * time.Second},
		},
		Identity:  host + "_" + fmt.Sprint(os.Getpid()),
		Tolerance: d.Tolerance, CPUInitPeriod: d.CPUInitializationPeriod, ReadinessDelay: d.InitialReadinessDelay,
		DownscaleWindow: d.DownscaleStabilizationWindow,
		ChangeFeed:      ChangeFeedOptions{MinInterval: time.Second, ReuseValues: true},
		Gates:           gates,
		Logging:         logsapi.NewLoggingConfiguration(),
		RecordOptions:   mrecord.DefaultOptions(),
		RecordServer:    recordserver.Options{BindAddress: "0.0.0.0:8443"},
		Webhook:         WebhookOptions{BindAddress: "0.0.0.0"},
	}
}

// AddFlags registers the options' flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file; in-cluster configuration when empty")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "queries per second to the API server")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "burst of queries to the API server")
	fs.StringVar(&o.KubeAPIContentType, "kube-api-content-type", o.KubeAPIContentType, "content type of requests to built-in APIs and the metrics APIs (scale reads and writes, events, metric reads); custom resources always use JSON")
	fs.BoolVar(&o.KubeAPICompression, "kube-api-compression", o.KubeAPICompression, "accept gzip-compressed answers from the API server, watch events included; off by default: in a cluster the bytes cost less than compressing and inflating every event")
	fs.Float32Var(&o.MetricsAPIQPS, "metrics-api-qps", o.MetricsAPIQPS, "queries per second to the metrics APIs (custom, external, resource), limited apart from --kube-api-qps: N autoscalers at a sync period P read about N/P a second")
	fs.IntVar(&o.MetricsAPIBurst, "metrics-api-burst", o.MetricsAPIBurst, "burst of queries to the metrics APIs")
	fs.DurationVar(&o.MetricReadTimeout, "metric-read-timeout", o.MetricReadTimeout, "deadline of one reconcile's metric reads, all metrics together, and never more than the object's sync period: a read it cuts is a failed read (no scale-down on it), so a hung adapter holds a worker at most this long")
	fs.IntVar(&o.Workers, "workers", o.Workers, "autoscalers reconciled concurrently")
	fs.BoolVar(&o.HPAObjects, "hpa-objects", o.HPAObjects, "also reconcile native autoscaling/v2 HorizontalPodAutoscalers (for clusters whose kube-controller-manager runs without its HPA controller)")
	fs.DurationVar(&o.HPASyncPeriod, "hpa-sync-period", o.HPASyncPeriod, "sync period of native HPAs (MetricAutoscalers have spec.syncPeriod)")
	fs.DurationVar(&o.HistorySync, "history-sync-interval", o.HistorySync, "how often a MetricAutoscaler's saved history is refreshed when nothing else in its status changes (a change of metrics or scale saves it at once)")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "serve /debug/pprof on the --bind-address server (authorized like /metrics: for benchmarks and debugging)")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "address (IP:port) of /metrics, /healthz, /readyz and /livez: HTTPS with the certificate of --tls-cert-file (self-signed without it); /metrics (and /debug/pprof) are served to callers the API server authenticates (TokenReview, client certificates) and authorizes (get on the non-resource URL, e.g. the metricscale-metrics-scraper ClusterRole), the probes' paths to anyone")
	fs.BoolVar(&o.InsecureMetrics, "insecure-metrics", o.InsecureMetrics, "serve --bind-address over plain HTTP without authentication or authorization, as releases before it was secured: keep it on a loopback address or behind a NetworkPolicy")
	componentbaseoptions.BindLeaderElectionFlags(&o.LeaderElection, fs)
	// The names of earlier releases, still accepted.
	fs.StringVar(&o.LeaderElection.ResourceNamespace, "leader-elect-namespace", o.LeaderElection.ResourceNamespace, "namespace of the leader Lease")
	fs.StringVar(&o.LeaderElection.ResourceName, "leader-elect-name", o.LeaderElection.ResourceName, "name of the leader Lease")
	_ = fs.MarkDeprecated("leader-elect-namespace", "use --leader-elect-resource-namespace")
	_ = fs.MarkDeprecated("leader-elect-name", "use --leader-elect-resource-name")
	fs.StringVar(&o.Identity, "leader-elect-identity", o.Identity, "this replica's identity in the Lease")
	fs.Float64Var(&o.Tolerance, "horizontal-pod-autoscaler-tolerance", o.Tolerance, "minimum change of the usage ratio that causes a rescale")
	fs.DurationVar(&o.CPUInitPeriod, "horizontal-pod-autoscaler-cpu-initialization-period", o.CPUInitPeriod, "after pod start, when cpu samples may be skipped")
	fs.DurationVar(&o.ReadinessDelay, "horizontal-pod-autoscaler-initial-readiness-delay", o.ReadinessDelay, "after pod start, when readiness changes count as the first readiness")
	fs.DurationVar(&o.DownscaleWindow, "horizontal-pod-autoscaler-downscale-stabilization", o.DownscaleWindow, "window of past recommendations a scale-down is held against")
	o.ChangeFeed.AddFlags(fs)
	o.Gates.AddFlag(fs)
	logsapi.AddFlags(o.Logging, fs)
	fs.BoolVar(&o.Record, "record", o.Record, "keep the inputs and decisions of the last reconciles of every MetricAutoscaler (bounded by --record-max-steps and --record-max-age) and serve them on --secure-bind-address, for `autoscaler record`")
	fs.IntVar(&o.RecordOptions.MaxSteps, "record-max-steps", o.RecordOptions.MaxSteps, "reconciles kept per MetricAutoscaler with --record (about 0.6 KB each for one External metric)")
	fs.DurationVar(&o.RecordOptions.MaxAge, "record-max-age", o.RecordOptions.MaxAge, "with --record, reconciles older than this are dropped (0: only --record-max-steps bounds them)")
	fs.StringVar(&o.RecordServer.BindAddress, "secure-bind-address", o.RecordServer.BindAddress, "with --record, address (IP:port) of the HTTPS server of recordings, whose callers the API server authenticates (TokenReview, client certificates) and authorizes (get metricautoscalers/record)")
	fs.StringVar(&o.RecordServer.CertFile, "tls-cert-file", o.RecordServer.CertFile, "serving certificate of --bind-address (unless --insecure-metrics) and --secure-bind-address; a self-signed one is generated without it")
	fs.StringVar(&o.RecordServer.KeyFile, "tls-private-key-file", o.RecordServer.KeyFile, "key of --tls-cert-file")
	fs.StringVar(&o.RecordServer.CertDir, "cert-dir", o.RecordServer.CertDir, "where the self-signed certificates are generated and kept (metrics.crt and metrics.key for --bind-address, record.crt and record.key for --secure-bind-address); in memory when empty")
	o.Webhook.AddFlags(fs)
}

// Settings are the decision settings the options give.
func (o *Options) Settings() decision.Settings {
	s := decision.DefaultSettings()
	s.Tolerance, s.CPUInitializationPeriod, s.InitialReadinessDelay, s.DownscaleStabilizationWindow = o.Tolerance, o.CPUInitPeriod, o.ReadinessDelay, o.DownscaleWindow
	s.Gates.ConfigurableTolerance = o.Gates.Enabled(GateConfigurableTolerance)
	s.Gates.ScaleToZero = o.Gates.Enabled(GateScaleToZero)
	s.Gates.PodLevelResources = o.Gates.Enabled(GatePodLevelResources)
	s.Gates.Generation = o.Gates.Enabled(GateGeneration)
	return s
}

// Validate checks the options and applies the logging configuration.
func (o *Options) Validate() error {
	var errs []error
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.Workers))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive, got %v and %d", o.KubeAPIQPS, o.KubeAPIBurst))
	}
	if o.MetricsAPIQPS <= 0 || o.MetricsAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--metrics-api-qps and --metrics-api-burst must be positive, got %v and %d", o.MetricsAPIQPS, o.MetricsAPIBurst))
	}
	if o.MetricReadTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--metric-read-timeout must be positive, got %s", o.MetricReadTimeout))
	}
	if o.KubeAPIContentType != runtime.ContentTypeProtobuf && o.KubeAPIContentType != runtime.ContentTypeJSON {
		errs = append(errs, fmt.Errorf("--kube-api-content-type must be %s or %s, got %q", runtime.ContentTypeProtobuf, runtime.ContentTypeJSON, o.KubeAPIContentType))
	}
	if o.HPASyncPeriod < time.Second {
		errs = append(errs, fmt.Errorf("--hpa-sync-period must be at least 1s, got %s", o.HPASyncPeriod))
	}
	if o.Tolerance < 0 {
		errs = append(errs, fmt.Errorf("--horizontal-pod-autoscaler-tolerance must not be negative, got %v", o.Tolerance))
	}
	le := o.LeaderElection
	if le.LeaderElect && le.RenewDeadline.Duration >= le.LeaseDuration.Duration {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be shorter than --leader-elect-lease-duration (%s)", le.RenewDeadline.Duration, le.LeaseDuration.Duration))
	}
	if le.LeaderElect && le.ResourceLock != resourcelock.LeasesResourceLock {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-lock must be %s, got %q", resourcelock.LeasesResourceLock, le.ResourceLock))
	}
	if o.RecordOptions.MaxSteps < 1 {
		errs = append(errs, fmt.Errorf("--record-max-steps must be at least 1, got %d", o.RecordOptions.MaxSteps))
	}
	if o.RecordOptions.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("--record-max-age must not be negative, got %s", o.RecordOptions.MaxAge))
	}
	if (o.RecordServer.CertFile == "") != (o.RecordServer.KeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file go together"))
	}
	if err := o.Webhook.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := o.ChangeFeed.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := logsapi.ValidateAndApply(o.Logging, o.Gates); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Run runs the controller until ctx ends. It reads as the steps of the
// controller's start, each a function below.
func Run(ctx context.Context, o *Options) error {
	cfg, clients, mas, err := o.makeClients(ctx)
	if err != nil {
		return err
	}
	recorder, broadcaster, err := makeEventRecorder(ctx, clients.Kube)
	if err != nil {
		return err
	}
	defer broadcaster.Shutdown()
	inf, kubeInformers := o.makeInformers(ctx, clients.Kube, mas)
	var tapes *mrecord.Recorder
	if o.Record {
		tapes = mrecord.New(o.RecordOptions)
	}
	ctrl, err := controller.New(controller.Config{
		Settings: o.Settings(), Workers: o.Workers, HPASyncPeriod: o.HPASyncPeriod, HistorySyncInterval: o.HistorySync,
		MetricReadTimeout: o.MetricReadTimeout,
		Recorder:          tapes,
	}, clients, inf, recorder, clock.RealClock{})
	if err != nil {
		return err
	}
	run, err := o.withChangeFeed(ctrl, cfg)
	if err != nil {
		return err
	}
	// Standbys keep warm caches, so that a failover starts at once.
	go inf.MetricAutoscalers.RunWithContext(ctx)
	kubeInformers.Start(ctx.Done())
	ready := watchSynced(ctx, inf)
	// Unhealthy when leading without renewing for this long past the lease.
	watchdog := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	if err := o.serveMetrics(serveCtx, handler(ready, watchdog, o.Profiling)); err != nil {
		return err
	}
	if err := o.Webhook.serveWebhook(serveCtx); err != nil {
		return err
	}
	lead := &leadership{self: o.Identity}
	if !o.LeaderElection.LeaderElect {
		lead.started()
	}
	if tapes != nil {
		if err := o.serveRecordings(ctx, tapes, lead); err != nil {
			return err
		}
	}
	if !o.LeaderElection.LeaderElect {
		return run(ctx)
	}
	return o.runElected(ctx, clients.Kube, recorder, watchdog, lead, run)
}

// clientConfig is the kubeconfig's config with the client flags applied:
// --kube-api-qps/--kube-api-burst, and --kube-api-compression (the API
// server gzips each watch event of a client that accepts it: inflating
// them was a twentieth of the autoscaler's CPU while 1,000 objects scaled).
func (o *Options) clientConfig(loaded *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(loaded)
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	cfg.DisableCompression = !o.KubeAPICompression
	return cfg
}

// makeClients builds the clients the controller reads and writes with, and
// returns the kubeconfig's config too (JSON, for custom resources and the
// change feed). Built-in APIs and the metrics APIs use
// --kube-api-content-type, protobuf by default as kube-controller-manager:
// a scale read and write costs both sides less than in JSON.
func (o *Options) makeClients(ctx context.Context) (*rest.Config, controller.Clients, *maclient.Client, error) {
	loaded, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, controller.Clients{}, nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg := o.clientConfig(loaded)
	builtin := rest.CopyConfig(cfg)
	builtin.ContentType = o.KubeAPIContentType
	builtin.AcceptContentTypes = o.KubeAPIContentType + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(builtin)
	if err != nil {
		return nil, controller.Clients{}, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, controller.Clients{}, nil, err
	}
	mas, err := maclient.NewForConfig(cfg)
	if err != nil {
		return nil, controller.Clients{}, nil, err
	}
	cached := memory.NewMemCacheClient(kube.Discovery())
	mapper := newMemoMapper(restmapper.NewDeferredDiscoveryRESTMapper(cached))
	scales, err := scale.NewForConfig(builtin, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
	if err != nil {
		return nil, controller.Clients{}, nil, err
	}
	source, err := metricsSource(ctx, o.metricsConfig(builtin), kube, mapper)
	if err != nil {
		return nil, controller.Clients{}, nil, err
	}
	return cfg, controller.Clients{Kube: kube, MetricAutoscalers: mas, Dynamic: dyn, Scales: scales, Mapper: mapper, Metrics: source}, mas, nil
}

// metricsConfig is the metrics APIs' client config: protobuf too (their
// types have it, and kube-controller-manager reads them so), and one rate
// limit of their own (--metrics-api-qps/--metrics-api-burst) that the
// resource, custom and external metrics clients share, so that the flag
// bounds all metric reads together (each client made its own limiter from
// QPS and Burst before: up to three times the figure).
func (o *Options) metricsConfig(builtin *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(builtin)
	cfg.QPS, cfg.Burst = o.MetricsAPIQPS, o.MetricsAPIBurst
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(o.MetricsAPIQPS, o.MetricsAPIBurst)
	return cfg
}

// makeEventRecorder starts the broadcaster of the controller's events (the
// caller shuts it down) and returns their recorder.
func makeEventRecorder(ctx context.Context, kube kubernetes.Interface) (record.EventRecorder, record.EventBroadcaster, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "metricscale-autoscaler"}), broadcaster, nil
}

// makeInformers makes the informers the controller reads from, and the
// factory of the HPAs' (started by the caller). The MetricAutoscalers' is
// read by key only: no namespace index. Pods and workloads have factories
// of their own, started when first needed.
func (o *Options) makeInformers(ctx context.Context, kube kubernetes.Interface, mas *maclient.Client) (controller.Informers, informers.SharedInformerFactory) {
	kubeInformers := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(controller.TrimCached))
	// The pod cache is started at the first reconcile that reads pods.
	podInformers := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(controller.TrimCached))
	inf := controller.Informers{
		MetricAutoscalers: maclient.NewInformer(mas, 0),
		Pods:              podInformers.Core().V1().Pods().Informer(),
		StartPods:         func() { podInformers.Start(ctx.Done()) },
		Workload:          workloadInformers(ctx, kube),
	}
	if o.HPAObjects {
		inf.HPAs = kubeInformers.Autoscaling().V2().HorizontalPodAutoscalers().Informer()
	}
	return inf, kubeInformers
}

// workloadInformers reads the scale of apps/v1 workloads from watch caches
// of their own, each started at the first target of its kind. No namespace
// index: the controller reads them by key only.
func workloadInformers(ctx context.Context, kube kubernetes.Interface) func(schema.GroupResource) cache.SharedIndexInformer {
	workloads := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(controller.TrimCached))
	noIndex := cache.Indexers{}
	return func(gr schema.GroupResource) cache.SharedIndexInformer {
		var informer cache.SharedIndexInformer
		switch gr.Resource {
		case "deployments":
			informer = workloads.InformerFor(&appsv1.Deployment{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
				return appsinformers.NewDeploymentInformer(c, metav1.NamespaceAll, resync, noIndex)
			})
		case "statefulsets":
			informer = workloads.InformerFor(&appsv1.StatefulSet{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
				return appsinformers.NewStatefulSetInformer(c, metav1.NamespaceAll, resync, noIndex)
			})
		case "replicasets":
			informer = workloads.InformerFor(&appsv1.ReplicaSet{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
				return appsinformers.NewReplicaSetInformer(c, metav1.NamespaceAll, resync, noIndex)
			})
		default:
			return nil
		}
		workloads.Start(ctx.Done())
		return informer
	}
}

// withChangeFeed returns how the controller runs: with the change feed,
// when --change-feed-url is set, queueing the objects whose metrics
// changed. The feed runs with the controller (the leader only).
func (o *Options) withChangeFeed(ctrl *controller.Controller, cfg *rest.Config) (func(context.Context) error, error) {
	if o.ChangeFeed.URL == "" {
		return ctrl.Run, nil
	}
	handler, err := ctrl.ChangeFeed(o.ChangeFeed.MinInterval)
	if err != nil {
		return nil, err
	}
	feed, err := o.ChangeFeed.client(cfg)
	if err != nil {
		return nil, err
	}
	if o.ChangeFeed.ReuseValues {
		handler.VouchFor(feed.Live, feed.Replica)
	}
	return func(ctx context.Context) error {
		go feed.Run(ctx, handler)
		return ctrl.Run(ctx)
	}, nil
}

// watchSynced returns what /readyz reads: true once the MetricAutoscalers'
// cache (and the HPAs', if read) has synced.
func watchSynced(ctx context.Context, inf controller.Informers) *atomic.Bool {
	ready := new(atomic.Bool)
	go func() {
		synced := []func() bool{inf.MetricAutoscalers.HasSynced}
		if inf.HPAs != nil {
			synced = append(synced, inf.HPAs.HasSynced)
		}
		for _, s := range synced {
			for !s() && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
		ready.Store(ctx.Err() == nil)
	}()
	return ready
}

// serveRecordings serves the recorder's tapes on --secure-bind-address.
func (o *Options) serveRecordings(ctx context.Context, tapes *mrecord.Recorder, lead *leadership) error {
	rs := o.RecordServer
	rs.Kubeconfig = o.Kubeconfig
	h := &recordserver.Handler{Recorder: tapes, Leader: lead.get, Identity: o.Identity, Now: time.Now}
	if err := rs.Serve(ctx, h); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Recording reconciles", "maxSteps", o.RecordOptions.MaxSteps, "maxAge", o.RecordOptions.MaxAge, "secureBindAddress", rs.BindAddress)
	return nil
}

// runElected runs the controller while this replica holds the leader
// Lease, until ctx ends or leadership is lost.
func (o *Options) runElected(ctx context.Context, kube kubernetes.Interface, recorder record.EventRecorder, watchdog *leaderelection.HealthzAdaptor, lead *leadership, run func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	le := o.LeaderElection
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.ResourceNamespace, Name: le.ResourceName},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.Identity, EventRecorder: recorder},
	}
	runErr := make(chan error, 1)
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, Name: le.ResourceName, ReleaseOnCancel: true, WatchDog: watchdog,
		LeaseDuration: le.LeaseDuration.Duration, RenewDeadline: le.RenewDeadline.Duration, RetryPeriod: le.RetryPeriod.Duration,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Became leader", "identity", o.Identity)
				lead.started()
				runErr <- run(ctx)
			},
			OnStoppedLeading: func() {
				lead.stopped()
				logger.Info("Stopped leading", "identity", o.Identity)
			},
			OnNewLeader: lead.observed,
		},
	})
	select {
	case err := <-runErr:
		if err != nil {
			return err
		}
	default:
	}
	if ctx.Err() == nil {
		// Leadership was lost while the context still runs: stop, so that
		// a restart rejoins the election cleanly.
		return errors.New("lost leadership")
	}
	return nil
}

// leadership is what the record server says of who leads.
type leadership struct {
	self    string
	mu      sync.Mutex
	leading bool
	leader  string
}

func (l *leadership) started() {
	l.mu.Lock()
	l.leading, l.leader = true, l.self
	l.mu.Unlock()
}

func (l *leadership) stopped() {
	l.mu.Lock()
	l.leading = false
	if l.leader == l.self {
		l.leader = ""
	}
	l.mu.Unlock()
}

func (l *leadership) observed(identity string) {
	l.mu.Lock()
	l.leader = identity
	l.mu.Unlock()
}

func (l *leadership) get() (bool, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading, l.leader
}

func metricsSource(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, mapper apimeta.RESTMapper) (metricsource.Source, error) {
	apis := customclient.NewAvailableAPIsGetter(kube.Discovery())
	go customclient.PeriodicallyInvalidate(apis, 5*time.Minute, ctx.Done())
	return metricsource.NewREST(cfg, mapper, apis, controller.ObserveMetricRead)
}

// probePaths are served to anyone on --bind-address: the kubelet's probes
// carry no credentials.
var probePaths = []string{"/healthz", "/healthz/*", "/readyz", "/readyz/*", "/livez", "/livez/*"}

// serveMetrics serves h on --bind-address until ctx ends: over HTTPS with
// delegated authentication and authorization of every path but the
// probes', or over plain HTTP with --insecure-metrics.
func (o *Options) serveMetrics(ctx context.Context, h http.Handler) error {
	if o.InsecureMetrics {
		return serve(ctx, o.BindAddress, h)
	}
	srv, err := secureserve.Options{
		Flag: "--bind-address", BindAddress: o.BindAddress,
		CertFile: o.RecordServer.CertFile, KeyFile: o.RecordServer.KeyFile, CertDir: o.RecordServer.CertDir, PairName: "metrics",
		Kubeconfig: o.Kubeconfig, AlwaysAllowPaths: probePaths,
	}.Listen("/metrics")
	if err != nil {
		return err
	}
	return srv.Serve(ctx, secureserve.Authorized(h, srv.Authenticator, srv.Authorizer))
}

// serve serves h over plain HTTP until ctx ends.
func serve(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Metrics server stopped")
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return nil
}

// handler serves /metrics, /healthz and /livez (with a leader-election
// check, as kube-controller-manager's: a leader that stopped renewing is
// unhealthy) and /readyz (informer caches synced).
func handler(ready *atomic.Bool, leader healthz.HealthChecker, profiling bool) http.Handler {
	mux := http.NewServeMux()
	if profiling {
		// The heap profile with ?gc=1 gives the live heap after a collection.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	}
	mux.Handle("/metrics", legacyregistry.Handler())
	healthz.InstallHandler(mux, healthz.PingHealthz, leader)
	healthz.InstallLivezHandler(mux, healthz.PingHealthz, leader)
	healthz.InstallReadyzHandler(mux, healthz.NamedCheck("informer-sync", func(*http.Request) error {
		if !ready.Load() {
			return errors.New("informer caches not synced")
		}
		return nil
	}))
	return mux
}
