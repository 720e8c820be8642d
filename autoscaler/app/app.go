// Package app builds the autoscaler controller from flags: clients,
// informers, leader election and the metrics/health endpoints.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/controller"
	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
)

// Options are the controller's command-line settings.
type Options struct {
	Kubeconfig      string
	Workers         int
	HPAObjects      bool
	HPASyncPeriod   time.Duration
	HistorySync     time.Duration
	BindAddress     string
	LeaderElect     bool
	LeaseNamespace  string
	LeaseName       string
	LeaseDuration   time.Duration
	RenewDeadline   time.Duration
	RetryPeriod     time.Duration
	Identity        string
	Tolerance       float64
	CPUInitPeriod   time.Duration
	ReadinessDelay  time.Duration
	DownscaleWindow time.Duration
	FeatureGates    map[string]bool
}

// NewOptions returns kube-controller-manager's defaults where they apply.
func NewOptions() *Options {
	d := decision.DefaultSettings()
	host, _ := os.Hostname()
	return &Options{
		Workers: 5, HPASyncPeriod: 15 * time.Second, HistorySync: 5 * time.Minute,
		BindAddress: ":8080", LeaderElect: true, LeaseNamespace: "metricscale", LeaseName: "metricscale-autoscaler",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Identity:  host + "_" + fmt.Sprint(os.Getpid()),
		Tolerance: d.Tolerance, CPUInitPeriod: d.CPUInitializationPeriod, ReadinessDelay: d.InitialReadinessDelay,
		DownscaleWindow: d.DownscaleStabilizationWindow, FeatureGates: map[string]bool{},
	}
}

// AddFlags registers the options' flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file; in-cluster configuration when empty")
	fs.IntVar(&o.Workers, "workers", o.Workers, "autoscalers reconciled concurrently")
	fs.BoolVar(&o.HPAObjects, "hpa-objects", o.HPAObjects, "also reconcile native autoscaling/v2 HorizontalPodAutoscalers (for clusters whose kube-controller-manager runs without its HPA controller)")
	fs.DurationVar(&o.HPASyncPeriod, "hpa-sync-period", o.HPASyncPeriod, "sync period of native HPAs (MetricAutoscalers have spec.syncPeriod)")
	fs.DurationVar(&o.HistorySync, "history-sync-interval", o.HistorySync, "how often a MetricAutoscaler's saved history is refreshed when nothing else in its status changes (a change of metrics or scale saves it at once)")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "address of /metrics, /healthz and /readyz")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "run only while holding the leader Lease")
	fs.StringVar(&o.LeaseNamespace, "leader-elect-namespace", o.LeaseNamespace, "namespace of the leader Lease")
	fs.StringVar(&o.LeaseName, "leader-elect-name", o.LeaseName, "name of the leader Lease")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "how long a standby waits before taking over an unrenewed Lease")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "how long the leader keeps trying to renew before it gives up leading")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "interval between attempts to acquire or renew the Lease")
	fs.StringVar(&o.Identity, "leader-elect-identity", o.Identity, "this replica's identity in the Lease")
	fs.Float64Var(&o.Tolerance, "horizontal-pod-autoscaler-tolerance", o.Tolerance, "minimum change of the usage ratio that causes a rescale")
	fs.DurationVar(&o.CPUInitPeriod, "horizontal-pod-autoscaler-cpu-initialization-period", o.CPUInitPeriod, "after pod start, when cpu samples may be skipped")
	fs.DurationVar(&o.ReadinessDelay, "horizontal-pod-autoscaler-initial-readiness-delay", o.ReadinessDelay, "after pod start, when readiness changes count as the first readiness")
	fs.DurationVar(&o.DownscaleWindow, "horizontal-pod-autoscaler-downscale-stabilization", o.DownscaleWindow, "window of past recommendations a scale-down is held against")
	fs.Var(gateFlag(o.FeatureGates), "feature-gates", "HPA feature gates, e.g. HPAScaleToZero=true,HPAConfigurableTolerance=false,PodLevelResources=true")
}

// Settings are the decision settings the options give.
func (o *Options) Settings() decision.Settings {
	s := decision.DefaultSettings()
	s.Tolerance, s.CPUInitializationPeriod, s.InitialReadinessDelay, s.DownscaleStabilizationWindow = o.Tolerance, o.CPUInitPeriod, o.ReadinessDelay, o.DownscaleWindow
	for name, on := range o.FeatureGates {
		switch name {
		case "HPAConfigurableTolerance":
			s.Gates.ConfigurableTolerance = on
		case "HPAScaleToZero":
			s.Gates.ScaleToZero = on
		case "PodLevelResources":
			s.Gates.PodLevelResources = on
		}
	}
	return s
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.Workers))
	}
	if o.HPASyncPeriod < time.Second {
		errs = append(errs, fmt.Errorf("--hpa-sync-period must be at least 1s, got %s", o.HPASyncPeriod))
	}
	if o.Tolerance < 0 {
		errs = append(errs, fmt.Errorf("--horizontal-pod-autoscaler-tolerance must not be negative, got %v", o.Tolerance))
	}
	if o.LeaderElect && o.RenewDeadline >= o.LeaseDuration {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be shorter than --leader-elect-lease-duration (%s)", o.RenewDeadline, o.LeaseDuration))
	}
	return errors.Join(errs...)
}

type gateFlag map[string]bool

func (g gateFlag) String() string {
	var parts []string
	for k, v := range g {
		parts = append(parts, fmt.Sprintf("%s=%t", k, v))
	}
	return strings.Join(parts, ",")
}

func (g gateFlag) Set(s string) error {
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || (v != "true" && v != "false") {
			return fmt.Errorf("feature gate %q: want Name=true or Name=false", kv)
		}
		switch k {
		case "HPAConfigurableTolerance", "HPAScaleToZero", "PodLevelResources":
		default:
			return fmt.Errorf("unknown feature gate %q (known: HPAConfigurableTolerance, HPAScaleToZero, PodLevelResources)", k)
		}
		g[k] = v == "true"
	}
	return nil
}

func (g gateFlag) Type() string { return "mapStringBool" }

// Run runs the controller until ctx ends.
func Run(ctx context.Context, o *Options) error {
	logger := klog.FromContext(ctx)
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cached := memory.NewMemCacheClient(kube.Discovery())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
	if err != nil {
		return err
	}
	source, err := metricsSource(ctx, cfg, kube, mapper)
	if err != nil {
		return err
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "metricscale-autoscaler"})

	kubeInformers := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(trimManagedFields))
	inf := controller.Informers{
		MetricAutoscalers: dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0).ForResource(v1alpha1.GroupVersionResource).Informer(),
		Pods:              kubeInformers.Core().V1().Pods().Informer(),
	}
	if o.HPAObjects {
		inf.HPAs = kubeInformers.Autoscaling().V2().HorizontalPodAutoscalers().Informer()
	}
	ctrl, err := controller.New(controller.Config{
		Settings: o.Settings(), Workers: o.Workers, HPASyncPeriod: o.HPASyncPeriod, HistorySyncInterval: o.HistorySync,
	}, controller.Clients{Kube: kube, Dynamic: dyn, Scales: scales, Mapper: mapper, Metrics: source}, inf, recorder, clock.RealClock{})
	if err != nil {
		return err
	}
	// Standbys keep warm caches, so that a failover starts at once.
	go inf.MetricAutoscalers.RunWithContext(ctx)
	kubeInformers.Start(ctx.Done())

	var ready atomic.Bool
	go func() {
		synced := []func() bool{inf.MetricAutoscalers.HasSynced, inf.Pods.HasSynced}
		for _, s := range synced {
			for !s() && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
		ready.Store(ctx.Err() == nil)
	}()
	srv, err := serve(ctx, o.BindAddress, &ready)
	if err != nil {
		return err
	}
	defer srv.Close()

	if !o.LeaderElect {
		return ctrl.Run(ctx)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.LeaseNamespace, Name: o.LeaseName},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.Identity, EventRecorder: recorder},
	}
	runErr := make(chan error, 1)
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, Name: o.LeaseName, ReleaseOnCancel: true,
		LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Became leader", "identity", o.Identity)
				runErr <- ctrl.Run(ctx)
			},
			OnStoppedLeading: func() { logger.Info("Stopped leading", "identity", o.Identity) },
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

func metricsSource(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper) (metricsource.Source, error) {
	res, err := resourceclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	apis := customclient.NewAvailableAPIsGetter(kube.Discovery())
	go customclient.PeriodicallyInvalidate(apis, 5*time.Minute, ctx.Done())
	ext, err := externalclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &metricsource.REST{Resource: res, Custom: customclient.NewForConfig(cfg, mapper, apis), External: ext}, nil
}

// trimManagedFields drops what the controller never reads from cached
// objects, to keep the pod cache small.
func trimManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

func serve(ctx context.Context, addr string, ready *atomic.Bool) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", legacyregistry.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "informer caches not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Metrics server stopped")
		}
	}()
	return srv, nil
}
