package convert_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/adapter/config"
	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1/crdtest"
	"github.com/metricscale/metricscale/autoscaler/convert"
	"github.com/metricscale/metricscale/providers/catalog"
	"github.com/metricscale/metricscale/providers/prometheus"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/ from the current output")

// golden compares got with testdata/file, or writes it with -update.
func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func readFixture(t *testing.T, file string) []convert.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := convert.ReadObjects(file, data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func loadCRD(t *testing.T) *crd {
	t.Helper()
	return &crd{crdtest.Load(t, "../../manifests/autoscaler/crd.yaml")}
}

type crd struct{ *crdtest.Validator }

// check fails t unless the API server would accept ma as written: no
// field pruned (unknown to the schema), no schema or CEL error.
func (c *crd) check(t *testing.T, ma *v1alpha1.MetricAutoscaler) {
	t.Helper()
	var buf bytes.Buffer
	if err := convert.WriteMetricAutoscalers(&buf, nil, []*v1alpha1.MetricAutoscaler{ma}); err != nil {
		t.Fatal(err)
	}
	var u map[string]any
	if err := yaml.Unmarshal(buf.Bytes(), &u); err != nil {
		t.Fatal(err)
	}
	stored, pruned, errs := c.Admit(u)
	if pruned {
		written, _ := json.Marshal(u)
		after, _ := json.Marshal(stored)
		t.Errorf("MetricAutoscaler %s: the API server would prune fields:\nwritten %s\nstored  %s", ma.Name, written, after)
	}
	if len(errs) > 0 {
		t.Errorf("MetricAutoscaler %s: the API server would refuse it: %v", ma.Name, errs.ToAggregate())
	}
}

// checkAdapterConfig fails t unless the adapter loads data with its own
// config validation (as adapter check-config does) without a warning.
func checkAdapterConfig(t *testing.T, data []byte) *config.Config {
	t.Helper()
	c, err := config.Parse(data, catalog.Factories())
	if err != nil {
		t.Fatalf("the adapter refuses the config: %v\n%s", err, data)
	}
	if w := c.Warnings(map[string]func(string, json.RawMessage) []string{prometheus.Type: prometheus.Warnings}); len(w) > 0 {
		t.Errorf("adapter check-config warns: %v", w)
	}
	return c
}

func TestHPAFixtures(t *testing.T) {
	t.Parallel()
	crd := loadCRD(t)
	tests := []struct {
		file    string
		wantErr string // a substring of the error, naming the field
		check   func(t *testing.T, mas []*v1alpha1.MetricAutoscaler)
	}{
		{file: "v2-external.yaml", check: func(t *testing.T, mas []*v1alpha1.MetricAutoscaler) {
			ma := mas[0]
			if ma.Annotations["owner"] != "team-queue" || ma.Annotations[convert.AnnotationFrom] != "HorizontalPodAutoscaler/workers" {
				t.Errorf("annotations %v: want owner kept and the source named", ma.Annotations)
			}
			if _, ok := ma.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; ok {
				t.Error("kubectl's last applied configuration (of the HPA) was copied")
			}
			if ma.Labels["app"] != "workers" || ma.UID != "" || ma.ResourceVersion != "" {
				t.Errorf("labels %v uid %q resourceVersion %q: want the labels and no server fields", ma.Labels, ma.UID, ma.ResourceVersion)
			}
		}},
		{file: "v1-cpu.yaml", check: func(t *testing.T, mas []*v1alpha1.MetricAutoscaler) {
			m := mas[0].Spec.Metrics
			if len(m) != 1 || m[0].Resource == nil || m[0].Resource.Name != "cpu" || *m[0].Resource.Target.AverageUtilization != 65 {
				t.Errorf("metrics %+v: want cpu at 65%%", m)
			}
		}},
		{file: "v1-default-cpu.yaml", check: func(t *testing.T, mas []*v1alpha1.MetricAutoscaler) {
			m := mas[0].Spec.Metrics
			if len(m) != 1 || *m[0].Resource.Target.AverageUtilization != 80 {
				t.Errorf("metrics %+v: want v1's default, cpu at 80%%", m)
			}
		}},
		{file: "v1-annotations.yaml", check: func(t *testing.T, mas []*v1alpha1.MetricAutoscaler) {
			s := mas[0].Spec
			var types []string
			for _, m := range s.Metrics {
				types = append(types, string(m.Type))
			}
			if got := strings.Join(types, ","); got != "External,Pods,Object,Resource" {
				t.Errorf("metric types %s: want the annotation's metrics, then cpu (the API server's order)", got)
			}
			if s.Metrics[2].Object.Target.Type != "Value" || s.Metrics[2].Object.Target.Value.String() != "200" {
				t.Errorf("object target %+v: want Value 200", s.Metrics[2].Object.Target)
			}
			if s.Behavior == nil || *s.Behavior.ScaleUp.SelectPolicy != "Min" || *s.Behavior.ScaleUp.StabilizationWindowSeconds != 30 {
				t.Errorf("behavior %+v: want the annotation's", s.Behavior)
			}
			for k := range mas[0].Annotations {
				if strings.HasPrefix(k, "autoscaling.alpha.kubernetes.io/") {
					t.Errorf("annotation %s copied", k)
				}
			}
		}},
		{file: "v2beta2.yaml"},
		{file: "v2beta1.yaml", check: func(t *testing.T, mas []*v1alpha1.MetricAutoscaler) {
			m := mas[0].Spec.Metrics
			if *m[0].Resource.Target.AverageUtilization != 50 || m[1].External.Target.Type != "Value" || m[2].ContainerResource.Container != "app" {
				t.Errorf("metrics %+v: want cpu 50%%, external Value, memory of container app", m)
			}
		}},
		{file: "list.yaml", check: func(t *testing.T, mas []*v1alpha1.MetricAutoscaler) {
			if len(mas) != 2 || mas[0].Name != "a" || mas[1].Name != "b" || *mas[1].Spec.MinReplicas != 2 {
				t.Errorf("got %d MetricAutoscalers: want a and b, from a List and a typed list", len(mas))
			}
		}},
		{file: "bad-unknown-field.yaml", wantErr: `unknown field "spec.metricz"`},
		{file: "bad-status-and-spec.yaml", wantErr: `unknown field "spec.metricz"`},
		{file: "bad-max.yaml", wantErr: "spec.maxReplicas: must be greater than or equal to `minReplicas`"},
		{file: "bad-min0-cpu.yaml", wantErr: "spec.metrics: must specify at least one Object or External metric"},
		{file: "bad-v1-annotation.yaml", wantErr: "metadata.annotations[autoscaling.alpha.kubernetes.io/metrics]"},
		{file: "bad-kind.yaml", wantErr: `kind "Deployment" is not HorizontalPodAutoscaler`},
		{file: "bad-version.yaml", wantErr: `apiVersion "autoscaling/v3"`},
		{file: "bad-policy.yaml", wantErr: "spec.behavior.scaleUp.policies[0].value"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			var mas []*v1alpha1.MetricAutoscaler
			var err error
			for _, o := range readFixture(t, "hpa/"+tt.file) {
				hpa, derr := convert.DecodeHPA(o)
				if derr != nil {
					err = derr
					break
				}
				ma, ferr := convert.FromHPA(hpa, convert.HPAOptions{})
				if ferr != nil {
					err = ferr
					break
				}
				mas = append(mas, ma)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, ma := range mas {
				crd.check(t, ma)
			}
			if tt.check != nil {
				tt.check(t, mas)
			}
			var buf bytes.Buffer
			if err := convert.WriteMetricAutoscalers(&buf, nil, mas); err != nil {
				t.Fatal(err)
			}
			golden(t, "hpa/"+strings.TrimSuffix(tt.file, ".yaml")+".golden.yaml", buf.Bytes())
		})
	}
}

// TestHPAInputs: whole files as users have them (helm template, kubectl
// --dry-run, kubectl get -o yaml, the Kubernetes docs): other kinds are
// skipped with a note, a status that does not parse is dropped, a managed
// HPA gets a warning naming the tool. The warnings are the golden file's
// comments.
func TestHPAInputs(t *testing.T) {
	t.Parallel()
	crd := loadCRD(t)
	tests := []struct {
		file      string
		wantNames []string
		wantNotes []string
		wantWarns []string
	}{
		{file: "helm-template.yaml", wantNames: []string{"release-name-web"},
			wantNotes: []string{"ServiceAccount release-name-web: skipped", "Service release-name-web: skipped", "Deployment release-name-web: skipped", "document 5: Pod release-name-web-test-connection: skipped"},
			wantWarns: []string{"HorizontalPodAutoscaler release-name-web is managed by Helm (app.kubernetes.io/managed-by: Helm): the next helm upgrade recreates the HPA"}},
		{file: "kubectl-dry-run.yaml", wantNames: []string{"php-apache"}, wantNotes: []string{"Deployment php-apache: skipped"}},
		{file: "docs-placeholder-status.yaml", wantNames: []string{"php-apache"}},
		{file: "helm-live-list.yaml", wantNames: []string{"cart", "checkout"},
			wantWarns: []string{"shop/cart is managed by Helm (app.kubernetes.io/managed-by: Helm)", "shop/checkout is managed by Argo CD (argocd.argoproj.io/tracking-id: shop:autoscaling/HorizontalPodAutoscaler:shop/checkout)"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			objs, notes := convert.HPAObjects(readFixture(t, "hpa/"+tt.file))
			var mas []*v1alpha1.MetricAutoscaler
			var warns, names []string
			for _, o := range objs {
				hpa, err := convert.DecodeHPA(o)
				if err != nil {
					t.Fatal(err)
				}
				ma, err := convert.FromHPA(hpa, convert.HPAOptions{})
				if err != nil {
					t.Fatal(err)
				}
				crd.check(t, ma)
				mas = append(mas, ma)
				names = append(names, ma.Name)
				warns = append(warns, convert.OwnerWarnings(hpa)...)
			}
			if !reflect.DeepEqual(names, tt.wantNames) {
				t.Errorf("converted %v, want %v", names, tt.wantNames)
			}
			if len(notes) != len(tt.wantNotes) {
				t.Errorf("notes %q, want %d", notes, len(tt.wantNotes))
			}
			for _, w := range tt.wantNotes {
				if !strings.Contains(strings.Join(notes, "\n"), w) {
					t.Errorf("notes %q: want %q", notes, w)
				}
			}
			if len(warns) != len(tt.wantWarns) {
				t.Errorf("warnings %q, want %d", warns, len(tt.wantWarns))
			}
			for _, w := range tt.wantWarns {
				if !strings.Contains(strings.Join(warns, "\n"), w) {
					t.Errorf("warnings %q: want %q", warns, w)
				}
			}
			var buf bytes.Buffer
			if err := convert.WriteMetricAutoscalers(&buf, warns, mas); err != nil {
				t.Fatal(err)
			}
			golden(t, "hpa/"+strings.TrimSuffix(tt.file, ".yaml")+".golden.yaml", buf.Bytes())
		})
	}
}

// TestHPASpecFieldForField: a v2 HPA's spec comes out unchanged, every
// field, whatever the fixture sets.
func TestHPASpecFieldForField(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"v2-external.yaml", "v2beta2.yaml"} {
		for _, o := range readFixture(t, "hpa/"+file) {
			hpa, err := convert.DecodeHPA(o)
			if err != nil {
				t.Fatal(err)
			}
			ma, err := convert.FromHPA(hpa, convert.HPAOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := ma.Spec.HPASpec(); !reflect.DeepEqual(got, hpa.Spec) {
				t.Errorf("%s: spec changed:\n got %+v\nwant %+v", file, got, hpa.Spec)
			}
			if ma.Spec.Paused || ma.Spec.DryRun || ma.Spec.SyncPeriod != nil || ma.Spec.Fallback != nil || ma.Spec.ScaleToZero != nil {
				t.Errorf("%s: MetricAutoscaler-only fields set: %+v", file, ma.Spec)
			}
		}
	}
}

func TestKEDAFixtures(t *testing.T) {
	t.Parallel()
	crd := loadCRD(t)
	tests := []struct {
		file    string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, res convert.KEDAResult, cfg *config.Config)
	}{
		{file: "rabbitmq-amqp.yaml", check: func(t *testing.T, res convert.KEDAResult, cfg *config.Config) {
			s := res.MetricAutoscalers[0].Spec
			if *s.MinReplicas != 0 || s.MaxReplicas != 100 || s.SyncPeriod.Duration.String() != "15s" {
				t.Errorf("min %d max %d syncPeriod %s: want KEDA's defaults 0 and 100, and 15s (the shorter of pollingInterval 30s and the HPA's 15s)", *s.MinReplicas, s.MaxReplicas, s.SyncPeriod.Duration)
			}
			if s.ScaleToZero == nil || s.ScaleToZero.CooldownPeriod.Duration.String() != "5m0s" || len(s.ScaleToZero.Activation) != 1 || s.ScaleToZero.Activation[0].Value.String() != "5" {
				t.Errorf("scaleToZero %+v: want KEDA's cooldown 300s and the activation value 5", s.ScaleToZero)
			}
			wantIssue(t, res, "spec.triggers[0].metadata.host", "password in the URL is not copied")
			if strings.Contains(dump(res.Adapter), "s3cret") {
				t.Error("the password of the host URL is in the adapter config")
			}
		}},
		{file: "rabbitmq-http.yaml", env: map[string]string{"RABBITMQ_MGMT": "http://billing@rabbitmq.shop.svc:15672/", "RABBITMQ_USER": "invoices"}, check: func(t *testing.T, res convert.KEDAResult, cfg *config.Config) {
			s := res.MetricAutoscalers[0].Spec
			if s.ScaleToZero != nil || s.SyncPeriod.Duration.String() != "10s" {
				t.Errorf("scaleToZero %+v syncPeriod %s: minReplicaCount 2 does not scale to zero; pollingInterval 10s", s.ScaleToZero, s.SyncPeriod.Duration)
			}
			if s.Metrics[1].External.Target.Type != "Value" {
				t.Errorf("metricType Value became %s", s.Metrics[1].External.Target.Type)
			}
			if len(cfg.Providers) != 3 { // memory + one per broker and user
				t.Errorf("%d providers, want memory and two rabbitmq ones (two hosts)", len(cfg.Providers))
			}
		}},
		{file: "cron.yaml", check: func(t *testing.T, res convert.KEDAResult, _ *config.Config) {
			if len(res.MetricAutoscalers) != 1 || res.MetricAutoscalers[0].Name != "cron-scaledobject" {
				t.Fatalf("converted %d, want cron-scaledobject alone", len(res.MetricAutoscalers))
			}
			s := res.MetricAutoscalers[0].Spec
			want := []v1alpha1.Schedule{
				{Name: "s0-cron", Start: "0 6 * * *", End: "0 20 * * *", TimeZone: "Asia/Kolkata", MinReplicas: 10},
				{Name: "weekend-batch", Start: "30 1 * * 6", End: "0 4 * * 6", TimeZone: "Europe/Paris", MinReplicas: 20},
			}
			if !reflect.DeepEqual(s.Schedules, want) {
				t.Errorf("schedules %+v, want %+v", s.Schedules, want)
			}
			if len(s.Metrics) != 1 || s.Metrics[0].External == nil || s.ScaleToZero == nil || len(s.ScaleToZero.Activation) != 1 {
				t.Errorf("metrics %+v scaleToZero %+v: want the redis trigger alone, with its activation", s.Metrics, s.ScaleToZero)
			}
			wantIssue(t, res, "spec.triggers[1].metadata.desiredReplicas", "above maxReplicaCount 20")
			wantFatal(t, res, "ScaledObject default/cron-only", "cron triggers only")
			wantFatal(t, res, "ScaledObject default/cron-bad", "unknown time zone")
			wantFatal(t, res, "ScaledObject default/cron-bad", "not a cron expression")
			for _, i := range res.Issues {
				if strings.Contains(i.Reason, `"cron"`) {
					t.Errorf("a cron trigger listed as not converted: %v", i)
				}
			}
		}},
		{file: "redis.yaml", check: func(t *testing.T, res convert.KEDAResult, cfg *config.Config) {
			if len(cfg.Providers) != 2 {
				t.Errorf("%d providers: the two triggers reach the same server as the same user, want them to share one", len(cfg.Providers))
			}
			s := res.MetricAutoscalers[0].Spec
			if s.Metrics[1].External.Target.AverageValue.String() != "5" {
				t.Errorf("listLength default: got %s, want KEDA's 5", s.Metrics[1].External.Target.AverageValue)
			}
		}},
		{file: "kafka.yaml"},
		{file: "kafka-defaults.yaml", check: func(t *testing.T, res convert.KEDAResult, _ *config.Config) {
			wantIssue(t, res, "allowIdleConsumers", "maxReplicas")
			wantIssue(t, res, "scaleToZeroOnInvalidOffset", "lag of 1")
			if v := res.MetricAutoscalers[0].Spec.Metrics[0].External.Target.AverageValue.String(); v != "10" {
				t.Errorf("lagThreshold default %s, want KEDA's 10", v)
			}
		}},
		{file: "postgresql.yaml", env: map[string]string{"PG_CONNECTION": "postgresql://keda@pg.bi.svc:5433/queues?sslmode=verify-full"}},
		{file: "nats.yaml"},
		{file: "prometheus.yaml", check: func(t *testing.T, res convert.KEDAResult, cfg *config.Config) {
			if len(res.MetricAutoscalers[0].Spec.Metrics) != 3 {
				t.Errorf("want three metrics: two prometheus, one cpu")
			}
			wantIssue(t, res, "authModes", "bearer")
		}},
		{file: "cpu-memory.yaml", check: func(t *testing.T, res convert.KEDAResult, _ *config.Config) {
			if res.Adapter != nil {
				t.Errorf("cpu and memory need no adapter config, got %+v", res.Adapter)
			}
			if len(res.Issues) != 0 {
				t.Errorf("issues %v, want none", res.Issues)
			}
		}},
		{file: "advanced.yaml", check: func(t *testing.T, res convert.KEDAResult, _ *config.Config) {
			s := res.MetricAutoscalers[0].Spec
			if !s.Paused || *s.MinReplicas != 0 || s.Fallback == nil || s.Fallback.Behavior != "currentReplicasIfHigher" || s.Behavior == nil || *s.Behavior.ScaleDown.StabilizationWindowSeconds != 120 {
				t.Errorf("spec %+v: want paused, minReplicas 0 (idle 0), the fallback and behavior", s)
			}
			if s.ScaleToZero.CooldownPeriod.Duration.String() != "10m0s" || s.ScaleToZero.Activation[0].Value.String() != "3" {
				t.Errorf("scaleToZero %+v: want cooldown 600s, activation 3", s.ScaleToZero)
			}
			wantIssue(t, res, "spec.idleReplicaCount", "minReplicas is 0")
			wantIssue(t, res, "restoreToOriginalReplicaCount", "no equivalent")
		}},
		{file: "unsupported.yaml", check: func(t *testing.T, res convert.KEDAResult, _ *config.Config) {
			if len(res.MetricAutoscalers) != 1 || res.MetricAutoscalers[0].Name != "previews" {
				t.Fatalf("converted %d: want only previews (uploads has an SQS trigger, combined a formula)", len(res.MetricAutoscalers))
			}
			wantFatal(t, res, "ScaledObject media/uploads", "spec.triggers[1].type")
			wantFatal(t, res, "ScaledObject media/combined", `spec.advanced.scalingModifiers formula "a % 10 + b": the remainder operator % has no equivalent`)
			wantFatal(t, res, "ScaledJob media/batch", "")
			wantIssue(t, res, "spec.triggers[0].authenticationRef", `"redis-auth"`)
			if strings.Contains(dump(res.Adapter), "keda-media-uploads") {
				t.Error("the adapter config serves a metric of a ScaledObject that did not convert")
			}
		}},
		{file: "unresolved-env.yaml", check: func(t *testing.T, res convert.KEDAResult, _ *config.Config) {
			if len(res.MetricAutoscalers) != 0 {
				t.Error("converted without a host")
			}
			wantFatal(t, res, "ScaledObject shop/env", "--env RABBIT_URL=VALUE")
		}},
		{file: "mixed.yaml", check: func(t *testing.T, res convert.KEDAResult, cfg *config.Config) {
			if len(res.MetricAutoscalers) != 1 || res.MetricAutoscalers[0].Name != "orders-consumer" {
				t.Fatalf("converted %d MetricAutoscalers, want orders-consumer", len(res.MetricAutoscalers))
			}
			p := providerOf(t, cfg, routeOf(cfg, "keda-orders-orders-consumer-s0-redis-streams"))
			if got := dump(p.Options); !strings.Contains(got, `"address":"redis.orders.svc.cluster.local:6379"`) ||
				!strings.Contains(got, `"password":{"file":"/etc/metricscale/secrets/redis-password/password"}`) ||
				!strings.Contains(got, `"type":"streamPending"`) || !strings.Contains(got, `"group":"consumer-group-1"`) {
				t.Errorf("provider options %s: want the Deployment's host and port, the Secret's key as a file, the group's pending entries", got)
			}
			wantIssue(t, res, "spec.triggers[0].authenticationRef", `mount Secret "redis-password" (key "password", of the ScaledObject's namespace)`)
			wantFatal(t, res, "ScaledJob orders/orders-batch", "")
			for _, want := range []string{"Secret orders/redis-password: skipped", "ServiceAccount orders/orders-consumer: skipped", "Deployment orders/orders-consumer: skipped", "Service orders/redis: skipped", "ClusterTriggerAuthentication unused-cluster-auth: skipped: no trigger"} {
				if !strings.Contains(strings.Join(res.Notes, "\n"), want) {
					t.Errorf("notes %q: want %q", res.Notes, want)
				}
			}
			noSecretValue(t, res, "c3VwZXItc2VjcmV0LXZhbHVl", "super-secret-value")
		}},
		{file: "redis-streams.yaml", env: map[string]string{"REDIS_PASSWORD": "from-env-value"}, check: func(t *testing.T, res convert.KEDAResult, cfg *config.Config) {
			want := map[string]string{
				"keda-default-redis-streams-scaledobject-s0-redis-streams": `"group":"consumer-group-1","key":"my-stream","name":"keda-default-redis-streams-scaledobject-s0-redis-streams","namespace":"default","type":"streamPending"`,
				"keda-default-redis-streams-length-s0-redis-streams":       `"key":"my-stream","name":"keda-default-redis-streams-length-s0-redis-streams","namespace":"default","type":"streamLength"`,
				"keda-default-redis-streams-lag-s0-redis-streams":          `"group":"consumer-group-1","key":"my-stream","name":"keda-default-redis-streams-lag-s0-redis-streams","namespace":"default","type":"streamLag"`,
			}
			if len(cfg.Providers) != 2 {
				t.Errorf("%d providers: want memory and one redis provider shared by the three triggers", len(cfg.Providers))
			}
			for metric, entry := range want {
				if !strings.Contains(dump(res.Adapter), entry) {
					t.Errorf("no entry %s for %s in %s", entry, metric, dump(res.Adapter))
				}
			}
			targets := map[string]string{"redis-streams-scaledobject": "10", "redis-streams-length": "50", "redis-streams-lag": "10"}
			for _, ma := range res.MetricAutoscalers {
				if got := ma.Spec.Metrics[0].External.Target.AverageValue.String(); got != targets[ma.Name] {
					t.Errorf("%s: target %s, want %s", ma.Name, got, targets[ma.Name])
				}
			}
			lag := res.MetricAutoscalers[2].Spec.ScaleToZero
			if lag == nil || lag.Activation[0].Value.String() != "3" {
				t.Errorf("lag scaleToZero %+v: want activation 3", lag)
			}
			noSecretValue(t, res, "from-env-value")
		}},
		{file: "duplicate-target.yaml", check: func(t *testing.T, res convert.KEDAResult, _ *config.Config) {
			if len(res.MetricAutoscalers) != 2 {
				t.Fatalf("converted %d, want both (a warning, not a refusal)", len(res.MetricAutoscalers))
			}
			wantIssue(t, res, "spec.scaleTargetRef", "Deployment worker is the target of ScaledObject worker-queue too")
			for _, i := range res.Issues {
				if i.Object == "ScaledObject jobs/worker-queue" {
					t.Errorf("the first ScaledObject has an issue: %v", i)
				}
			}
		}},
		{file: "fallback-scalingmodifiers.yaml", check: func(t *testing.T, res convert.KEDAResult, _ *config.Config) {
			if len(res.MetricAutoscalers) != 2 || res.MetricAutoscalers[0].Spec.Fallback.Behavior != "currentReplicasIfLower" {
				t.Fatalf("want api-static, with its fallback behavior, and api-zero: %+v", res.MetricAutoscalers)
			}
			if f := res.MetricAutoscalers[1].Spec.Fallback; f.FailureThreshold != 1 || f.Replicas != 4 {
				t.Errorf("api-zero fallback %+v: want KEDA's failureThreshold 0 as 1", f)
			}
			wantIssue(t, res, "spec.fallback.failureThreshold", "KEDA falls back at the first failed read")
			wantFatal(t, res, "ScaledObject web/api", "spec.fallback.behavior")
		}},
		{file: "postgresql-connection-password.yaml", env: map[string]string{"AIRFLOW_CONN_AIRFLOW_DB": "postgresql://airflow:hunter2-pg@pg.my-project.svc:5432/airflow?sslmode=require"}, check: func(t *testing.T, res convert.KEDAResult, cfg *config.Config) {
			wantIssue(t, res, "spec.triggers[0].metadata.connection", "the password in the connection string is not copied: mount the password (a Secret) at /etc/metricscale/secrets/keda-postgresql/password")
			if !strings.Contains(dump(res.Adapter), `"password":{"file":"/etc/metricscale/secrets/keda-postgresql/password"}`) {
				t.Errorf("adapter %s: want the password read from a file", dump(res.Adapter))
			}
			noSecretValue(t, res, "hunter2-pg")
		}},
		{file: "podidentity.yaml", check: func(t *testing.T, res convert.KEDAResult, _ *config.Config) {
			if len(res.MetricAutoscalers) != 0 {
				t.Errorf("converted %d, want none", len(res.MetricAutoscalers))
			}
			wantFatal(t, res, "ScaledObject stream/msk-consumer", "podIdentity (provider aws)")
			wantFatal(t, res, "ScaledObject stream/vault-consumer", "hashiCorpVault")
			noSecretValue(t, res, "my-token")
		}},
		{file: "auth-sources.yaml", check: func(t *testing.T, res convert.KEDAResult, cfg *config.Config) {
			var names []string
			for _, ma := range res.MetricAutoscalers {
				names = append(names, ma.Name)
			}
			if strings.Join(names, ",") != "airflow-worker,redis-jobs,mailer" {
				t.Errorf("converted %v, want airflow-worker, redis-jobs and mailer", names)
			}
			wantIssue(t, res, "spec.triggers[0].metadata.passwordFromEnv", `the adapter reads the password (the workload's variable REDIS_PASSWORD) from /etc/metricscale/secrets/mailer-redis/password`)
			if a, b := routeOf(cfg, "keda-queues-mailer-s0-redis"), routeOf(cfg, "keda-queues-redis-jobs-s0-redis"); a == b {
				t.Errorf("mailer and redis-jobs share provider %s: one server, two passwords (two Secrets) need two providers", a)
			}
			wantFatal(t, res, "ScaledObject queues/rabbitmq-scaledobject", `from key "host" of Secret "keda-rabbitmq-secret" (TriggerAuthentication "keda-trigger-auth-rabbitmq-conn"): convert never copies a Secret's values`)
			wantFatal(t, res, "ScaledObject queues/redis-worker", `REDIS_ADDRESS is read from key "redis_address" of Secret "app-secrets" by the workload`)
			wantIssue(t, res, "spec.triggers[0].authenticationRef", `the password (TriggerAuthentication "redis-wrong-key") is key "redis_password" of Secret "app-secrets", which has no such key in the input`)
			wantIssue(t, res, "spec.triggers[0].authenticationRef", `TriggerAuthentication "redis-wrong-key" parameter "cert": not read by convert`)
			if a := dump(res.Adapter); !strings.Contains(a, `"password":{"file":"/etc/metricscale/secrets/app-secrets/postgresql_password"}`) {
				t.Errorf("adapter %s: want the postgresql password read from the Secret's key", a)
			}
			noSecretValue(t, res, "cG9zdGdyZXMtc2VjcmV0", "postgres-secret", "rabbit-secret", "YW1xcDovL3VzZXI6cmFiYml0LXNlY3JldEByYWJiaXRtcS5xdWV1ZXMuc3ZjOjU2NzIvdmhvc3Q=", "rabbitmq.queues.svc")
		}},
		{file: "scaling-modifiers.yaml", check: func(t *testing.T, res convert.KEDAResult, _ *config.Config) {
			if len(res.MetricAutoscalers) != 4 {
				t.Fatalf("converted %d, want queues-max, latency, average and partial", len(res.MetricAutoscalers))
			}
			qm := res.MetricAutoscalers[0].Spec
			for _, m := range qm.Metrics {
				if m.External.Target.Type != "AverageValue" || m.External.Target.AverageValue.String() != "10" {
					t.Errorf("queues-max metric %s target %+v: want the formula's AverageValue 10", m.External.Metric.Name, m.External.Target)
				}
			}
			if a := qm.ScaleToZero.Activation; len(a) != 2 || a[0].Value.String() != "2" || a[1].Value.String() != "2" {
				t.Errorf("queues-max activation %+v: want the formula's 2 on both (any above 2 is the max above 2)", a)
			}
			lt := res.MetricAutoscalers[1].Spec.Metrics[0].External.Target
			if lt.Type != "Value" || lt.Value.String() != "250" {
				t.Errorf("latency target %+v: want Value 250", lt)
			}
			if qm.Formula != nil || res.MetricAutoscalers[1].Spec.Formula != nil {
				t.Error("a formula of one trigger or the max of every trigger became spec.formula: want each metric on the formula's target")
			}
			av := res.MetricAutoscalers[2].Spec
			if f := av.Formula; f == nil || f.Name != "composite-metric" || f.Expression != "(trig_one + trig_two) / 2" ||
				f.Target.Type != "AverageValue" || f.Target.AverageValue.String() != "2" ||
				len(f.Inputs) != 2 || f.Inputs[0] != (v1alpha1.FormulaInput{Name: "trig_one", Metric: 0}) || f.Inputs[1] != (v1alpha1.FormulaInput{Name: "trig_two", Metric: 1}) {
				t.Errorf("average formula %+v: want KEDA's composite-metric, the docs' formula over both triggers, AverageValue 2", av.Formula)
			}
			if a := av.ScaleToZero.Activation; len(a) != 0 {
				t.Errorf("average activation %+v: want none (the triggers' own are not KEDA's with a formula)", a)
			}
			wantIssue(t, res, "spec.advanced.scalingModifiers.activationTarget", "when the formula's value is above 2, a MetricAutoscaler when one of its inputs (trig_one, trig_two) is above zero")
			// a trigger outside the formula is read into KEDA's composite: an input it does not use
			if f := res.MetricAutoscalers[3].Spec.Formula; f == nil || f.Expression != "one" || len(f.Inputs) != 2 || f.Inputs[1].Name != "two" {
				t.Errorf("partial formula %+v: want one, with two an input too", f)
			}
			for _, i := range res.Issues {
				if i.Fatal {
					t.Errorf("not converted: %v", i)
				}
			}
		}},
		{file: "formula.yaml", check: func(t *testing.T, res convert.KEDAResult, _ *config.Config) {
			if len(res.MetricAutoscalers) != 2 {
				t.Fatalf("converted %d, want checkout and mailer", len(res.MetricAutoscalers))
			}
			co := res.MetricAutoscalers[0].Spec
			if f := co.Formula; f == nil || f.Expression != "(orders + 2 * payments) / 3" || f.Target.Type != "Value" || f.Target.Value.String() != "20" || len(f.Inputs) != 2 {
				t.Errorf("checkout formula %+v: want the formula over orders and payments on Value 20", co.Formula)
			}
			if co.Fallback == nil || co.Fallback.FailureThreshold != 3 || co.Fallback.Replicas != 6 || co.Fallback.Behavior != "static" {
				t.Errorf("checkout fallback %+v: want KEDA's, static", co.Fallback)
			}
			if len(co.Metrics) != 3 || co.Metrics[2].Resource == nil || co.Metrics[2].Resource.Name != "cpu" {
				t.Errorf("checkout metrics %+v: want the two queues and cpu, which proposes on its own as in KEDA's HPA", co.Metrics)
			}
			ml := res.MetricAutoscalers[1].Spec
			if f := ml.Formula; f == nil || f.Expression != "emails > 100 ? emails + retries : math.greatest(emails, retries)" || len(f.Inputs) != 3 || f.Inputs[2] != (v1alpha1.FormulaInput{Name: "audit_log", Metric: 2}) {
				t.Errorf("mailer formula %+v: want the ternary in CEL, audit-log an input as audit_log", ml.Formula)
			}
			if ml.ScaleToZero == nil || len(ml.ScaleToZero.Activation) != 0 {
				t.Errorf("mailer scaleToZero %+v: want no per-metric activation (activationListLength is not KEDA's with a formula)", ml.ScaleToZero)
			}
			wantIssue(t, res, "spec.advanced.scalingModifiers.activationTarget", "above 5")
			wantFatal(t, res, "ScaledObject shop/ranked", "the function count()")
		}},
		{file: "formula-names.yaml", check: func(t *testing.T, res convert.KEDAResult, _ *config.Config) {
			if len(res.MetricAutoscalers) != 1 {
				t.Fatalf("converted %d, want names alone", len(res.MetricAutoscalers))
			}
			s := res.MetricAutoscalers[0].Spec
			want := []v1alpha1.FormulaInput{{Name: "_math", Metric: 0}, {Name: "in_flight", Metric: 1}, {Name: "trigger_2", Metric: 2}}
			if f := s.Formula; f == nil || f.Expression != "_math + 1" || !reflect.DeepEqual(f.Inputs, want) {
				t.Errorf("names formula %+v: want the inputs %+v (math is CEL's namespace) and the expression renamed", s.Formula, want)
			}
			if len(s.Schedules) != 0 || len(s.Metrics) != 3 {
				t.Errorf("names schedules %+v metrics %d: want the cron trigger outside the formula dropped (KEDA's HPA never sees it), three metrics", s.Schedules, len(s.Metrics))
			}
			wantIssue(t, res, "spec.triggers[3]", "not in the formula, it has no effect in KEDA")
			wantFatal(t, res, "ScaledObject jobs/typed", `formula "a || b", in CEL "a || b": spec.formula.expression`)
			wantFatal(t, res, "ScaledObject jobs/with-cpu", `trigger "usage" (cpu) is in the formula`)
			wantFatal(t, res, "ScaledObject jobs/with-cron", `trigger "office" (cron) is in the formula`)
		}},
		{file: "bad-formula-name.yaml", wantErr: `spec.advanced.scalingModifiers.formula: "c" is not the name of a trigger`},
		{file: "bad-cpu-min0.yaml", wantErr: "spec.minReplicaCount: 0 needs a trigger other than cpu and memory"},
		{file: "bad-fallback-no-formula.yaml", wantErr: "spec.fallback.behavior: scalingModifiers needs spec.advanced.scalingModifiers.formula"},
		{file: "bad-no-target.yaml", wantErr: "spec.scaleTargetRef.name: required"},
		{file: "bad-idle.yaml", wantErr: "spec.idleReplicaCount: 3 must be less than minReplicaCount (2)"},
		{file: "bad-version.yaml", wantErr: `apiVersion "keda.k8s.io/v1alpha1"`},
		{file: "bad-metadata-type.yaml", wantErr: "spec.triggers.metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			res, err := convert.FromKEDA(readFixture(t, "keda/"+tt.file), convert.KEDAOptions{Env: tt.env})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, ma := range res.MetricAutoscalers {
				crd.check(t, ma)
			}
			var lines []string
			for _, i := range res.Issues {
				lines = append(lines, i.String())
			}
			var buf bytes.Buffer
			if err := convert.WriteMetricAutoscalers(&buf, lines, res.MetricAutoscalers); err != nil {
				t.Fatal(err)
			}
			name := strings.TrimSuffix(tt.file, ".yaml")
			golden(t, "keda/"+name+".golden.yaml", buf.Bytes())
			var cfg *config.Config
			if res.Adapter != nil {
				merged, err := convert.MergeAdapterConfig(nil, res.Adapter)
				if err != nil {
					t.Fatal(err)
				}
				cfg = checkAdapterConfig(t, merged)
				golden(t, "keda/"+name+".adapter.golden.yaml", merged)
				// every converted metric has its route to a provider serving it
				for _, ma := range res.MetricAutoscalers {
					for _, m := range ma.Spec.Metrics {
						if m.External != nil && routeOf(cfg, m.External.Metric.Name) == "" {
							t.Errorf("no route for %s", m.External.Metric.Name)
						}
					}
				}
			}
			if tt.check != nil {
				tt.check(t, res, cfg)
			}
		})
	}
}

func routeOf(c *config.Config, metric string) string {
	for _, r := range c.Routes {
		if r.Metric == metric {
			return r.Provider
		}
	}
	return ""
}

func providerOf(t *testing.T, c *config.Config, name string) config.Provider {
	t.Helper()
	for _, p := range c.Providers {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no provider %q", name)
	return config.Provider{}
}

// noSecretValue fails t if a value appears in anything convert writes:
// the MetricAutoscalers, the adapter config, the issues and the notes.
func noSecretValue(t *testing.T, res convert.KEDAResult, values ...string) {
	t.Helper()
	all := dump(res)
	for _, v := range values {
		if strings.Contains(all, v) {
			t.Errorf("the secret value %q is in the output", v)
		}
	}
}

func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func wantIssue(t *testing.T, res convert.KEDAResult, field, reason string) {
	t.Helper()
	for _, i := range res.Issues {
		if strings.Contains(i.Field, field) && strings.Contains(i.Reason, reason) {
			return
		}
	}
	t.Errorf("no issue at %s saying %q in %v", field, reason, res.Issues)
}

func wantFatal(t *testing.T, res convert.KEDAResult, object, field string) {
	t.Helper()
	for _, i := range res.Issues {
		if i.Fatal && i.Object == object && (field == "" || strings.Contains(i.Field+" "+i.Reason, field)) {
			return
		}
	}
	t.Errorf("no not-converted issue for %s at %s in %v", object, field, res.Issues)
}
