package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/adapter/config"
	"github.com/metricscale/metricscale/providers/catalog"
)

func TestConvertCommand(t *testing.T) {
	t.Parallel()
	const hpas, keda = "../../autoscaler/convert/testdata/hpa/", "../../autoscaler/convert/testdata/keda/"
	v1, err := os.ReadFile(hpas + "v1-cpu.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cpuMemory, err := os.ReadFile(keda + "cpu-memory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantOut    string
		wantNoOut  bool
		wantStderr string
		adapter    bool // --adapter-config written into a temporary folder
	}{
		{name: "hpa from stdin", args: []string{"hpa", "-f", "-"}, stdin: string(v1), wantOut: "kind: MetricAutoscaler"},
		{name: "hpa from files", args: []string{"hpa", "-f", hpas + "v1-cpu.yaml", "-f", hpas + "list.yaml"}, wantOut: "name: b\n"},
		{name: "hpa sync period", args: []string{"hpa", "-f", hpas + "v1-cpu.yaml", "--sync-period", "5s"}, wantOut: "syncPeriod: 5s"},
		{name: "bad hpa: the field, nothing on stdout", args: []string{"hpa", "-f", hpas + "bad-unknown-field.yaml"},
			wantCode: 1, wantNoOut: true, wantStderr: `unknown field "spec.metricz"`},
		{name: "keda converted exactly", args: []string{"keda", "-f", keda + "cpu-memory.yaml"}, wantOut: "averageUtilization: 70"},
		{name: "keda with issues: exit 3, listed on stderr and in the output", args: []string{"keda", "-f", keda + "rabbitmq-amqp.yaml"}, adapter: true,
			wantCode: 3, wantOut: "# ScaledObject shop/orders: converted with a change: spec.triggers[0].metadata.host", wantStderr: "password in the URL is not copied"},
		{name: "keda --env", args: []string{"keda", "-f", keda + "unresolved-env.yaml", "--env", "RABBIT_URL=amqp://rabbit:5672/"}, adapter: true,
			wantCode: 3, wantOut: "name: keda-shop-env-s0-rabbitmq", wantStderr: "guest is assumed"},
		{name: "keda not converted", args: []string{"keda", "-f", keda + "unresolved-env.yaml"},
			wantCode: 3, wantOut: "# ScaledObject shop/env: not converted", wantStderr: "--env RABBIT_URL=VALUE"},
		{name: "keda without --adapter-config", args: []string{"keda", "-f", keda + "redis.yaml"},
			wantCode: 2, wantNoOut: true, wantStderr: "--adapter-config FILE is required"},
		{name: "bad keda", args: []string{"keda", "-f", keda + "bad-no-target.yaml"}, wantCode: 1, wantNoOut: true, wantStderr: "spec.scaleTargetRef.name: required"},
		{name: "keda: other kinds skipped with a note, exit 0 when the ScaledObjects convert exactly", args: []string{"keda", "-f", "-"},
			stdin:   "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: web, namespace: shop}\n---\n" + string(cpuMemory),
			wantOut: "averageUtilization: 70", wantStderr: "note: -: document 1: ServiceAccount shop/web: skipped: not a ScaledObject"},
		{name: "keda: a real file of many kinds", args: []string{"keda", "-f", keda + "mixed.yaml"}, adapter: true,
			wantCode: 3, wantOut: "name: orders-consumer", wantStderr: "note: " + keda + "mixed.yaml: document 1: Secret orders/redis-password: skipped"},
		{name: "keda: no ScaledObject", args: []string{"keda", "-f", "-"}, stdin: "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
			wantCode: 1, wantNoOut: true, wantStderr: "no ScaledObject found"},
		{name: "keda-invalid: cpu only with minReplicaCount 0 is an error", args: []string{"keda", "-f", keda + "bad-cpu-min0.yaml"},
			wantCode: 1, wantNoOut: true, wantStderr: "spec.minReplicaCount: 0 needs a trigger other than cpu and memory"},
		{name: "keda-valid, not convertible: fallback behavior scalingModifiers is exit 3", args: []string{"keda", "-f", keda + "fallback-scalingmodifiers.yaml"}, adapter: true,
			wantCode: 3, wantOut: "name: api-static", wantStderr: "ScaledObject web/api: not converted: spec.fallback.behavior"},
		{name: "keda: a connection string's password is mounted, exit 3", args: []string{"keda", "-f", keda + "postgresql-connection-password.yaml", "--env", "AIRFLOW_CONN_AIRFLOW_DB=postgresql://airflow:hunter2@pg:5432/airflow"}, adapter: true,
			wantCode: 3, wantOut: "keda-my-project-postgresql-scaledobject-s0-postgresql", wantStderr: "the password in the connection string is not copied"},
		{name: "hpa: helm template output, other kinds skipped, Helm-owned warned: exit 3", args: []string{"hpa", "-f", hpas + "helm-template.yaml"},
			wantCode: 3, wantOut: "# HorizontalPodAutoscaler release-name-web is managed by Helm", wantStderr: "warning: HorizontalPodAutoscaler release-name-web is managed by Helm"},
		{name: "hpa: kubectl --dry-run output", args: []string{"hpa", "-f", hpas + "kubectl-dry-run.yaml"},
			wantOut: "name: php-apache", wantStderr: "note: " + hpas + "kubectl-dry-run.yaml: document 1: Deployment php-apache: skipped: not a HorizontalPodAutoscaler"},
		{name: "hpa: a docs status with placeholders", args: []string{"hpa", "-f", hpas + "docs-placeholder-status.yaml"}, wantOut: "name: requests-per-second"},
		{name: "hpa: no HPA in the input", args: []string{"hpa", "-f", "-"}, stdin: "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n",
			wantCode: 1, wantNoOut: true, wantStderr: "no HorizontalPodAutoscaler found"},
		{name: "keda: a connection string not given is not converted, exit 3", args: []string{"keda", "-f", keda + "postgresql-connection-password.yaml"},
			wantCode: 3, wantOut: "not converted", wantStderr: "--env AIRFLOW_CONN_AIRFLOW_DB=VALUE (its password is not copied: it becomes a file to mount)"},
		{name: "keda: a redis address with a password is refused, never copied", args: []string{"keda", "-f", "-", "--env", "REDIS_URL=redis://u:hunter2@redis:6379"},
			stdin:    "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: r, namespace: x}\nspec:\n  scaleTargetRef: {name: r}\n  minReplicaCount: 1\n  triggers:\n  - {type: redis, metadata: {addressFromEnv: REDIS_URL, listName: l}}\n",
			wantCode: 3, wantOut: "not converted", wantStderr: "the address holds credentials"},
		{name: "no kind", args: nil, wantCode: 2, wantNoOut: true, wantStderr: "Usage"},
		{name: "apply from files", args: []string{"hpa", "--apply", "-f", hpas + "v1-cpu.yaml"}, wantCode: 2, wantNoOut: true, wantStderr: "--apply hands over the cluster's HPAs"},
		{name: "names with -f", args: []string{"hpa", "-f", hpas + "v1-cpu.yaml", "web"}, wantCode: 2, wantNoOut: true, wantStderr: "-f reads files"},
		{name: "keda flag on hpa", args: []string{"hpa", "-f", hpas + "v1-cpu.yaml", "--paused"}, wantCode: 2, wantNoOut: true, wantStderr: "are for keda"},
		{name: "bad --env", args: []string{"keda", "-f", keda + "redis.yaml", "--env", "X"}, wantCode: 2, wantNoOut: true, wantStderr: `--env "X"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := tc.args
			var cfgFile string
			if tc.adapter {
				cfgFile = filepath.Join(t.TempDir(), "adapter.yaml")
				args = append(args, "--adapter-config", cfgFile)
			}
			var out, errOut bytes.Buffer
			code := convertCmd(context.Background(), args, strings.NewReader(tc.stdin), &out, &errOut)
			checkRun(t, code, &out, &errOut, tc.wantCode, tc.wantNoOut, tc.wantOut, tc.wantStderr)
			if strings.Contains(out.String()+errOut.String(), "hunter2") {
				t.Error("a password given with --env is in the output")
			}
			if cfgFile != "" {
				data, err := os.ReadFile(cfgFile)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := config.Parse(data, catalog.Factories()); err != nil {
					t.Errorf("the adapter refuses the written config: %v", err)
				}
			}
		})
	}
}
