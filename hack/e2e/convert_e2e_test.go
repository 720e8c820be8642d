//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/autoscaler/convert"
)

var (
	convertBinOnce sync.Once
	convertBin     string
	convertBinErr  error
)

// autoscalerBinary builds cmd/autoscaler from this checkout once.
func autoscalerBinary(t *testing.T) string {
	t.Helper()
	convertBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "metricscale-convert-e2e-")
		if err != nil {
			convertBinErr = err
			return
		}
		convertBin = filepath.Join(dir, "autoscaler")
		cmd := exec.Command("go", "build", "-o", convertBin, "./cmd/autoscaler")
		cmd.Dir = cluster.RepoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			convertBinErr = fmt.Errorf("go build ./cmd/autoscaler: %v\n%s", err, out)
		}
	})
	if convertBinErr != nil {
		t.Fatal(convertBinErr)
	}
	return convertBin
}

// runConvert runs `autoscaler convert ARGS --kubeconfig K` and returns its
// outputs and exit code.
func runConvert(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, autoscalerBinary(t), append(append([]string{"convert"}, args...), "--kubeconfig", cluster.Kubeconfig)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("autoscaler convert %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// replicaLog records every spec.replicas a Deployment's watch shows.
type replicaLog struct {
	mu     sync.Mutex
	values []int32
	times  []time.Time
}

func (l *replicaLog) add(v int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.values); n == 0 || l.values[n-1] != v {
		l.values, l.times = append(l.values, v), append(l.times, time.Now())
	}
}

func (l *replicaLog) snapshot() []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.values)
}

// watchReplicas follows ns/name's spec.replicas from its current version on,
// every change (a watch, not a poll: no change can fall between two samples).
func watchReplicas(t *testing.T, ns, name string) *replicaLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := &replicaLog{}
	l.add(*d.Spec.Replicas)
	w, err := cluster.Client.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + name, ResourceVersion: d.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ctx.Err() != nil {
				return // stopped at the end of the test
			}
			if ev.Type == watch.Error {
				// a change could have been missed: the record is not whole
				t.Errorf("watching Deployment %s/%s: %v", ns, name, apierrors.FromObject(ev.Object))
				return
			}
			if d, ok := ev.Object.(*appsv1.Deployment); ok {
				l.add(*d.Spec.Replicas)
			}
		}
		if ctx.Err() == nil {
			t.Errorf("the watch of Deployment %s/%s ended before the test: a change could have been missed", ns, name)
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return l
}

// TestConvertHPAHandover: kube-controller-manager's HPA holds a Deployment
// at 3 replicas on a pushed External metric, with a scale-down it is holding
// back (the metric asks for 1, the stabilization window keeps 3);
// `autoscaler convert hpa --apply` hands it over to a MetricAutoscaler. The
// Deployment's spec.replicas, watched from before the handover to well after
// it, never changes; the HPA is gone, the MetricAutoscaler took its status
// and holds the same scale-down back, and it alone scales the Deployment
// when the metric rises. A second run finds nothing to do.
func TestConvertHPAHandover(t *testing.T) {
	needAutoscaler(t)
	if !cluster.HPAController {
		t.Fatal("the handover needs kube-controller-manager's HPA controller; the cluster runs with --no-hpa-controller")
	}
	autoscalerBinary(t) // built before the clock matters
	ctx := context.Background()
	ns := cluster.CreateNamespace(t, "convert-hpa")
	queue := "convert-" + ns
	pushDepth(t, queue, 90) // 3 replicas at 30 per replica
	cluster.CreateDeployment(t, KwokDeployment(ns, "workers", 1, "100m", "10m"))
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: ns, Labels: map[string]string{"team": "queue"}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "workers"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 10,
			Metrics:  []autoscalingv2.MetricSpec{queueSpec(queue, "30")},
			Behavior: scaleDownBehavior(180, 1, 15),
		},
	}
	cluster.CreateHPA(t, hpa)
	waitReplicas(t, ns, "workers", 3, 2*time.Minute)
	Eventually(t, 2*time.Minute, 500*time.Millisecond, "the HPA at 3 replicas", func(ctx context.Context) (bool, string, error) {
		h, err := cluster.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "workers", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return h.Status.CurrentReplicas == 3 && h.Status.DesiredReplicas == 3 && h.Status.LastScaleTime != nil,
			fmt.Sprintf("current %d desired %d %s", h.Status.CurrentReplicas, h.Status.DesiredReplicas, conditionsOf(h.Status.Conditions)), nil
	})

	// The metric drops to a third: the HPA's recommendation is 1, its
	// window holds 3 (for 180s from its last recommendation of 3).
	replicas := watchReplicas(t, ns, "workers")
	pushDepth(t, queue, 30)
	dropped := time.Now()
	Eventually(t, time.Minute, 200*time.Millisecond, "the HPA holding the scale-down back", func(ctx context.Context) (bool, string, error) {
		h, err := cluster.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "workers", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range h.Status.Conditions {
			if c.Type == autoscalingv2.AbleToScale && c.Reason == "ScaleDownStabilized" {
				return true, "", nil
			}
		}
		return false, conditionsOf(h.Status.Conditions), nil
	})
	time.Sleep(2 * cluster.HPASyncPeriod) // and keeps holding it for a few syncs

	start := time.Now()
	stdout, stderr, code := runConvert(t, "hpa", "--apply", "-n", ns, "workers")
	took := time.Since(start)
	t.Logf("convert hpa --apply (%s, exit %d):\n%s%s", took.Round(time.Millisecond), code, stdout, stderr)
	if code != 0 || !strings.Contains(stdout, "metricautoscaler.autoscaling.metricscale.dev/workers handed over") {
		t.Fatalf("convert hpa --apply: exit %d, want 0 and the handover reported", code)
	}
	if _, err := cluster.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "workers", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the HPA is still there after the handover (%v)", err)
	}
	ma, err := getMA(ctx, ns, "workers")
	if err != nil {
		t.Fatal(err)
	}
	if ma.Spec.Paused || ma.Labels[convert.LabelHandover] != "done" || ma.Labels["team"] != "queue" {
		t.Errorf("MetricAutoscaler paused=%v labels %v: want unpaused, handover done, the HPA's labels", ma.Spec.Paused, ma.Labels)
	}
	if h := ma.Status.History; h == nil || len(h.Recommendations) == 0 || h.Recommendations[0].Replicas != 3 {
		t.Errorf("status.history %+v: want the starting recommendation of 3", ma.Status.History)
	}

	// The MetricAutoscaler reconciles the lower metric and holds 3 back,
	// as the HPA did.
	Eventually(t, time.Minute, 200*time.Millisecond, "the MetricAutoscaler holding the scale-down back", func(ctx context.Context) (bool, string, error) {
		m, err := getMA(ctx, ns, "workers")
		if err != nil {
			return false, "", err
		}
		ok := m.Status.ObservedGeneration != nil && *m.Status.ObservedGeneration == m.Generation
		for _, c := range m.Status.Conditions {
			ok = ok && (c.Type != autoscalingv2.AbleToScale || c.Reason == "ScaleDownStabilized")
		}
		return ok && len(m.Status.Conditions) > 0, fmt.Sprintf("generation %d observed %v; %s; targets %s", m.Generation, m.Status.ObservedGeneration, conditionsOf(m.Status.Conditions), m.Status.Targets), nil
	})
	// Watch on: the whole time from the drop, through the handover, until
	// well after it, the Deployment stays at 3.
	hold := 20 * time.Second
	time.Sleep(hold)
	if got := replicas.snapshot(); !slices.Equal(got, []int32{3}) {
		t.Fatalf("spec.replicas changed across the handover: %v (want 3 throughout)", got)
	}
	t.Logf("spec.replicas stayed 3 for %s: from the metric drop through the handover (%s) to %s after it",
		time.Since(dropped).Round(time.Second), took.Round(time.Millisecond), hold)

	// It alone scales now: the metric rises, the MetricAutoscaler goes to 6.
	pushDepth(t, queue, 180)
	rose := time.Now()
	waitReplicas(t, ns, "workers", 6, time.Minute)
	t.Logf("the MetricAutoscaler scaled 3 → 6 %s after the metric rose", time.Since(rose).Round(100*time.Millisecond))
	if got := replicas.snapshot(); !slices.Equal(got, []int32{3, 6}) {
		t.Errorf("spec.replicas went %v, want 3 then 6", got)
	}
	if m, err := getMA(ctx, ns, "workers"); err != nil || m.Status.CurrentReplicas != 6 && m.Status.DesiredReplicas != 6 {
		t.Errorf("MetricAutoscaler status %+v, %v: want it to have made the rescale", m.Status, err)
	}

	// Idempotent: a second run has nothing to do.
	stdout, stderr, code = runConvert(t, "hpa", "--apply", "-n", ns, "workers")
	if code != 0 || !strings.Contains(stdout, "already handed over") {
		t.Errorf("second run: exit %d:\n%s%s\nwant 0 and already handed over", code, stdout, stderr)
	}
}

// scaledObjectCRD is a minimal stand-in for KEDA's CRD: the group, kind and
// version, and a spec kept as given.
const scaledObjectCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: scaledobjects.keda.sh
spec:
  group: keda.sh
  names: {kind: ScaledObject, listKind: ScaledObjectList, plural: scaledobjects, singular: scaledobject, shortNames: [so]}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// TestConvertKEDA: a ScaledObject whose triggers read the cluster's real
// backends — Redis, RabbitMQ's management API and PostgreSQL
// (hack/backends) and Prometheus, two queries — is converted from the
// cluster. The adapter config written (the running one plus the converted
// providers and routes) passes `adapter check-config` and is loaded live by
// the running adapter, with the passwords mounted where it says; every
// converted External metric answers what the backend holds, and the
// converted MetricAutoscaler scales the Deployment on the Redis list.
func TestConvertKEDA(t *testing.T) {
	needAutoscaler(t)
	running, err := cluster.runningBackends()
	for _, b := range []string{"redis", "rabbitmq", "postgresql"} {
		if err != nil || !slices.Contains(running, b) {
			t.Fatalf("the cluster runs no %s backend (it runs %v, %v)", b, running, err)
		}
	}
	if cluster.PrometheusURL == "" {
		t.Fatal("the cluster runs without Prometheus (and so without an adapter config)")
	}
	ctx := context.Background()
	redisEnv, rabbitEnv, pgEnv := backendEnv("redis")(t), backendEnv("rabbitmq")(t), backendEnv("postgresql")(t)

	// The ScaledObject CRD, unless KEDA's is installed.
	if _, err := cluster.Client.Discovery().ServerResourcesForGroupVersion("keda.sh/v1alpha1"); err != nil {
		crdFile := filepath.Join(t.TempDir(), "crd.yaml")
		if err := os.WriteFile(crdFile, []byte(scaledObjectCRD), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := cluster.Kubectl(ctx, "apply", "-f", crdFile); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		t.Cleanup(func() {
			_, _ = cluster.Kubectl(context.Background(), "delete", "crd", "scaledobjects.keda.sh", "--wait=false")
		})
		if out, err := cluster.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/scaledobjects.keda.sh"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}

	ns := cluster.CreateNamespace(t, "convert-keda")
	list := "convert-" + ns
	rabbit, pg := queueBackendOf(t, "rabbitmq"), queueBackendOf(t, "postgresql")
	mgmt, err := url.Parse(rabbitEnv["METRICSCALE_RABBITMQ_MANAGEMENT_URL"])
	if err != nil {
		t.Fatal(err)
	}
	// KEDA's form: http://user@host:port/vhost, the vhost "/" escaped
	rabbitHost := fmt.Sprintf("http://%s@%s/%%2F", rabbitEnv["METRICSCALE_RABBITMQ_USER"], mgmt.Host)
	cluster.CreateDeployment(t, KwokDeployment(ns, "mailer", 1, "100m", "10m"))
	so := fmt.Sprintf(`apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: mailer, namespace: %s}
spec:
  scaleTargetRef: {name: mailer}
  pollingInterval: 2
  minReplicaCount: 1
  maxReplicaCount: 10
  triggers:
  - type: redis
    authenticationRef: {name: redis-credentials}
    metadata: {address: %q, username: %q, listName: %q, listLength: "5"}
  - type: rabbitmq
    metadata: {host: %q, mode: QueueLength, value: "1000", queueName: e2e-jobs}
  - type: postgresql
    authenticationRef: {name: pg-credentials}
    metadata:
      host: %q
      port: %q
      userName: %q
      dbName: %q
      sslmode: disable
      query: "SELECT count(*) FROM jobs WHERE queue = 'e2e-jobs' AND state = 'pending';"
      targetQueryValue: "1000"
  - type: prometheus
    metadata: {serverAddress: %q, query: "vector(4)", threshold: "1000"}
  - type: prometheus
    metadata: {serverAddress: %q, query: "metricscale_convert_e2e_no_such_series", threshold: "1000"}
`, ns, redisEnv["METRICSCALE_REDIS_ADDR"], redisEnv["METRICSCALE_REDIS_USER"], list, rabbitHost,
		pgEnv["METRICSCALE_POSTGRESQL_HOST"], pgEnv["METRICSCALE_POSTGRESQL_PORT"], pgEnv["METRICSCALE_POSTGRESQL_USER"], pgEnv["METRICSCALE_POSTGRESQL_DATABASE"],
		cluster.PrometheusURL, cluster.PrometheusURL)
	soFile := filepath.Join(t.TempDir(), "so.yaml")
	if err := os.WriteFile(soFile, []byte(so), 0o644); err != nil {
		t.Fatal(err)
	}
	Eventually(t, time.Minute, time.Second, "the ScaledObject created", func(ctx context.Context) (bool, string, error) {
		out, err := cluster.Kubectl(ctx, "apply", "-f", soFile)
		return err == nil, out, nil
	})

	// Convert from the cluster, on top of the running adapter's config.
	adapterFile := filepath.Join(cluster.Dir, "adapter", "config.yaml")
	original, err := os.ReadFile(adapterFile)
	if err != nil {
		t.Fatalf("the adapter's config (the cluster runs it with --config when Prometheus runs): %v", err)
	}
	dir := t.TempDir()
	credDir, maFile, cfgFile := filepath.Join(dir, "secrets"), filepath.Join(dir, "mas.yaml"), filepath.Join(dir, "adapter.yaml")
	stdout, stderr, code := runConvert(t, "keda", "-n", ns, "-o", maFile, "--adapter-config", cfgFile,
		"--adapter-config-base", adapterFile, "--credentials-dir", credDir)
	t.Logf("convert keda: exit %d\n%s%s", code, stdout, stderr)
	// Credentials are not copied: exit 3, and each file to mount one at.
	passwords := map[string]string{ // provider → the backend's password file
		"keda-redis":      redisEnv["METRICSCALE_REDIS_PASSWORD_FILE"],
		"keda-rabbitmq":   rabbitEnv["METRICSCALE_RABBITMQ_PASSWORD_FILE"],
		"keda-postgresql": pgEnv["METRICSCALE_POSTGRESQL_PASSWORD_FILE"],
	}
	if code != 3 || !strings.Contains(stderr, `TriggerAuthentication "redis-credentials" is not read`) {
		t.Fatalf("exit %d, want 3 with the credentials' issues", code)
	}
	for p := range passwords {
		if f := filepath.Join(credDir, p, "password"); !strings.Contains(stderr, f) {
			t.Errorf("stderr does not name %s", f)
		}
	}
	mas, _ := os.ReadFile(maFile)
	cfg, _ := os.ReadFile(cfgFile)
	t.Logf("MetricAutoscaler:\n%s", mas)
	if out, err := exec.Command(adapterBinary(t), "check-config", "-f", cfgFile).CombinedOutput(); err != nil || strings.Contains(string(out), ": warning: ") {
		t.Fatalf("adapter check-config: %v\n%s", err, out)
	} else {
		t.Logf("adapter check-config: %s", strings.TrimSpace(string(out)))
	}
	// The passwords, where the config says (Secrets mounted there, in a cluster).
	var parsed struct {
		Providers []struct {
			Name    string `json:"name"`
			Options struct {
				Password struct{ File string } `json:"password"`
			} `json:"options"`
		} `json:"providers"`
	}
	if err := yaml.Unmarshal(cfg, &parsed); err != nil {
		t.Fatal(err)
	}
	written := 0
	for _, p := range parsed.Providers {
		src, ok := passwords[p.Name]
		if !ok {
			continue
		}
		if want := filepath.Join(credDir, p.Name, "password"); p.Options.Password.File != want {
			t.Fatalf("provider %s reads its password from %q, want %s", p.Name, p.Options.Password.File, want)
		}
		if err := os.MkdirAll(filepath.Dir(p.Options.Password.File), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p.Options.Password.File, []byte(secretFile(t, src, p.Name+"'s password")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		written++
	}
	if written != len(passwords) {
		t.Fatalf("%d of the providers %v in the written config", written, passwords)
	}

	// The running adapter loads it live; the original is put back at the end.
	metrics := adapterMetricsClient(t)
	t.Cleanup(func() {
		writeAtomically(t, adapterFile, original)
		waitConfigHash(t, metrics, original)
	})
	writeAtomically(t, adapterFile, cfg)
	waitConfigHash(t, metrics, cfg)

	// Every converted metric answers what its backend holds.
	admin := goredis.NewClient(&goredis.Options{Addr: redisEnv["METRICSCALE_REDIS_ADDR"],
		Password: secretFile(t, redisEnv["METRICSCALE_REDIS_ADMIN_PASSWORD_FILE"], "the redis admin password")})
	defer admin.Close()
	t.Cleanup(func() { admin.Del(context.Background(), list) })
	push := func(n int) {
		jobs := make([]any, n)
		for i := range jobs {
			jobs[i] = "job-" + strconv.Itoa(i)
		}
		if err := admin.RPush(ctx, list, jobs...).Err(); err != nil {
			t.Fatalf("RPUSH %s: %v", list, err)
		}
	}
	push(7)
	metric := func(i int, typ string) string { return fmt.Sprintf("keda-%s-mailer-s%d-%s", ns, i, typ) }
	externalValue(t, ns, metric(0, "redis"), "7")
	rabbit.publish(ctx, t, 3)
	t.Cleanup(func() { rabbit.drain(context.Background(), t) })
	pg.publish(ctx, t, 2)
	t.Cleanup(func() { pg.drain(context.Background(), t) })
	externalValue(t, ns, metric(1, "rabbitmq"), strconv.Itoa(rabbit.count(ctx, t)))
	externalValue(t, ns, metric(2, "postgresql"), strconv.Itoa(pg.count(ctx, t)))
	externalValue(t, ns, metric(3, "prometheus"), "4")
	externalValue(t, ns, metric(4, "prometheus"), "0") // no series: 0, as KEDA's ignoreNullValues reads it
	t.Logf("the five converted metrics answer: redis 7, rabbitmq %d, postgresql %d, prometheus 4 and 0", rabbit.count(ctx, t), pg.count(ctx, t))

	if out, err := cluster.Kubectl(ctx, "apply", "-f", maFile); err != nil {
		t.Fatalf("kubectl apply the converted MetricAutoscaler: %v\n%s", err, out)
	}
	ma, err := getMA(ctx, ns, "mailer")
	if err != nil {
		t.Fatal(err)
	}
	if ma.Spec.SyncPeriod == nil || ma.Spec.SyncPeriod.Duration != 2*time.Second || *ma.Spec.MinReplicas != 1 || ma.Spec.MaxReplicas != 10 || len(ma.Spec.Metrics) != 5 {
		t.Errorf("spec %+v: want syncPeriod 2s (pollingInterval), min 1, max 10, five metrics", ma.Spec)
	}
	waitReplicas(t, ns, "mailer", 2, time.Minute) // ceil(7 / 5); the others ask for 1
	push(23)                                      // 30 jobs: 6 replicas
	rose := time.Now()
	waitReplicas(t, ns, "mailer", 6, time.Minute)
	t.Logf("the converted MetricAutoscaler scaled to 6 %s after the list grew to 30", time.Since(rose).Round(100*time.Millisecond))
	if n, _ := admin.LLen(ctx, list).Result(); n != 30 {
		t.Errorf("LLEN %s = %d, want 30", list, n)
	}
	// The controller scales before it writes the status (as the HPA
	// controller does): the Deployment can show 6 a moment before the status.
	Eventually(t, 10*time.Second, 200*time.Millisecond, "the MetricAutoscaler's status shows the rescale to 6", func(ctx context.Context) (bool, string, error) {
		m, err := getMA(ctx, ns, "mailer")
		if err != nil {
			return false, "", err
		}
		return m.Status.DesiredReplicas == 6, fmt.Sprintf("desiredReplicas %d (targets %s)", m.Status.DesiredReplicas, m.Status.Targets), nil
	})
}
