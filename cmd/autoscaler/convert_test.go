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
