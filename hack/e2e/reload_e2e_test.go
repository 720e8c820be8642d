//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// TestConfigReload rewrites the running adapter's --config
// (DIR/adapter/config.yaml, see start_adapter in hack/cluster.sh) and checks,
// through the aggregator, that a valid change applies live — a new memory
// provider serving a new name, the unchanged memory provider keeping its
// pushed series, the same process — and that an invalid one is refused: the
// old routes keep answering, config_reloads_total{result="failure"} goes up,
// the log says why and a ConfigReloadFailed event is on the adapter's pod
// (hack/cluster.sh names one for the host process). The original file is
// restored at the end.
func TestConfigReload(t *testing.T) {
	if cluster.PushURL == "" {
		t.Fatal("the metricscale adapter does not run in the local cluster")
	}
	file := filepath.Join(cluster.Dir, "adapter", "config.yaml")
	original, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the adapter's config (the cluster runs it with --config when Prometheus runs): %v", err)
	}
	pid := reloadAdapterPid(t)
	if !strings.Contains(procCmdline(t, pid), "--config="+file) {
		t.Fatalf("the adapter (pid %d) does not read %s: %s", pid, file, procCmdline(t, pid))
	}
	metrics := adapterMetricsClient(t)
	ns := cluster.CreateNamespace(t, "reload")
	ctx := context.Background()

	t.Cleanup(func() {
		writeAtomically(t, file, original)
		waitConfigHash(t, metrics, original)
	})
	t.Cleanup(func() {
		if t.Failed() { // the adapter's reload log lines, before the cluster's next run truncates its log
			logs, _ := os.ReadFile(filepath.Join(cluster.Dir, "logs", "metricscale-adapter.log"))
			for _, l := range strings.Split(string(logs), "\n") {
				if strings.Contains(l, "onfig") && strings.Contains(l, "reload.go") {
					t.Log(l)
				}
			}
		}
	})
	waitConfigHash(t, metrics, original) // the adapter reports the config it started with

	// (0) a series in the memory provider, which the reload leaves alone
	if err := cluster.Push(ctx, fmt.Sprintf("e2e_reload_kept{namespace=%q} 5\n", ns)); err != nil {
		t.Fatal(err)
	}
	externalValue(t, ns, "e2e_reload_kept", "5")

	// (1) a valid change: a second memory provider, "reloaded", takes the
	// e2e_reloaded_* names ahead of the catch-all
	var cfg map[string]any
	if err := yaml.Unmarshal(original, &cfg); err != nil {
		t.Fatal(err)
	}
	provs, _ := cfg["providers"].([]any)
	routes, _ := cfg["routes"].([]any)
	if len(provs) == 0 || len(routes) == 0 {
		t.Fatalf("unexpected config %s", original)
	}
	cfg["providers"] = append(provs, map[string]any{"name": "reloaded", "type": "memory"})
	cfg["routes"] = append([]any{map[string]any{"metric": "e2e_reloaded_*", "provider": "reloaded", "kind": "external"}}, routes...)
	changed, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	successes := reloadCount(t, metrics, "success")
	writeAtomically(t, file, changed)
	waitConfigHash(t, metrics, changed)
	t.Logf("applied live: config_info hash %s", hashOf(changed))
	if got := reloadCount(t, metrics, "success"); got != successes+1 {
		t.Errorf("config_reloads_total{result=success}: %v → %v, want one more", successes, got)
	}

	if err := cluster.Push(ctx, fmt.Sprintf("e2e_reloaded_jobs{namespace=%q} 9\n", ns)); err != nil {
		t.Fatalf("push to the new route: %v", err)
	}
	externalValue(t, ns, "e2e_reloaded_jobs", "9")
	if n := providerRequests(t, metrics, "reloaded", "e2e_reloaded_jobs"); n < 1 {
		t.Errorf("no query of e2e_reloaded_jobs was answered by the new provider (requests_total{provider=reloaded} = %v)", n)
	}
	Eventually(t, 30*time.Second, time.Second, "discovery to list e2e_reloaded_jobs", func(ctx context.Context) (bool, string, error) {
		body, err := adapterRawGet(ctx, cluster.Client, "/apis/external.metrics.k8s.io/v1beta1", nil)
		return strings.Contains(string(body), `"e2e_reloaded_jobs"`), string(body), err
	})
	externalValue(t, ns, "e2e_reload_kept", "5") // the unchanged provider kept its series
	if got := reloadAdapterPid(t); got != pid {
		t.Errorf("the adapter restarted: pid %d, was %d", got, pid)
	}

	// (2) an invalid change: refused, the running config serves on
	failures := reloadCount(t, metrics, "failure")
	invalid := append(append([]byte(nil), changed...), []byte("colour: blue\n")...)
	writeAtomically(t, file, invalid)
	Eventually(t, reloadWait, 500*time.Millisecond, "the failure counter to go up", func(context.Context) (bool, string, error) {
		got := reloadCount(t, metrics, "failure")
		return got > failures, fmt.Sprintf("failures %v (was %v)", got, failures), nil
	})
	externalValue(t, ns, "e2e_reloaded_jobs", "9")
	externalValue(t, ns, "e2e_reload_kept", "5")
	if h := configHash(t, metrics); h != hashOf(changed) {
		t.Errorf("config_info hash %s after a refused change, want the running %s", h, hashOf(changed))
	}
	logs, err := os.ReadFile(filepath.Join(cluster.Dir, "logs", "metricscale-adapter.log"))
	if err != nil {
		t.Fatal(err)
	}
	logLine := regexp.MustCompile(`"Config reload failed; keeping the running config" err="config ` + regexp.QuoteMeta(file) + `: [^"]*unknown field \\"colour\\"`)
	if !logLine.Match(logs) {
		t.Errorf("the adapter's log has no line naming the file and the field")
	}
	if env := procEnviron(t, pid); env["POD_NAME"] == "" {
		t.Log("the adapter runs without POD_NAME: no event to check, the log line was checked instead")
	} else {
		Eventually(t, 30*time.Second, time.Second, "a ConfigReloadFailed event on the adapter's pod", func(ctx context.Context) (bool, string, error) {
			evs, err := cluster.Client.CoreV1().Events(env["POD_NAMESPACE"]).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + env["POD_NAME"] + ",reason=ConfigReloadFailed"})
			if err != nil {
				return false, "", err
			}
			for _, ev := range evs.Items {
				if ev.Type == "Warning" && strings.Contains(ev.Message, `unknown field "colour"`) && strings.Contains(ev.Message, file) {
					t.Logf("event on pod %s/%s: %s %s: %s", env["POD_NAMESPACE"], env["POD_NAME"], ev.Type, ev.Reason, ev.Message)
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%d events", len(evs.Items)), nil
		})
	}
	if got := reloadAdapterPid(t); got != pid {
		t.Errorf("the adapter restarted: pid %d, was %d", got, pid)
	}
}

// reloadWait bounds a reload: the watch applies a change within about a
// second, but if the adapter could not get an inotify instance (a shared
// machine can run out) only its periodic check, every minute, does.
const reloadWait = 150 * time.Second

// externalValue waits until the external metric answers want in ns.
func externalValue(t *testing.T, ns, metric, want string) {
	t.Helper()
	adapterGetMetrics(t, "/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/"+metric, nil, metric+" = "+want,
		func(items []adapterMetricItem) bool { return len(items) == 1 && items[0].Value.String() == want })
}

func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeAtomically replaces file as an editor does: a new file renamed over it.
func writeAtomically(t *testing.T, file string, data []byte) {
	t.Helper()
	tmp := file + ".e2e.tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// waitConfigHash waits until the adapter serves the config data.
func waitConfigHash(t *testing.T, c *http.Client, data []byte) {
	t.Helper()
	want := hashOf(data)
	Eventually(t, reloadWait, 500*time.Millisecond, "the adapter to run config "+want, func(context.Context) (bool, string, error) {
		got := configHash(t, c)
		return got == want, "running " + got, nil
	})
}

// adapterMetricsClient reaches the adapter's own /metrics with the admin's
// client certificate (the adapter trusts the cluster's client CA).
func adapterMetricsClient(t *testing.T) *http.Client {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", adapterSecurePort)
	cfg.TLSClientConfig.Insecure = true // the adapter's self-generated serving certificate
	cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile = nil, ""
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Timeout = 10 * time.Second
	return c
}

func adapterMetricsText(t *testing.T, c *http.Client) string {
	t.Helper()
	resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", adapterSecurePort))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("adapter /metrics: %d %s", resp.StatusCode, body)
	}
	return string(body)
}

// metricValue sums the samples of name whose labels include every match.
func metricValue(text, name string, match map[string]string) (float64, bool) {
	var sum float64
	found := false
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for k, v := range match {
			if !strings.Contains(line, k+`="`+v+`"`) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err == nil {
			sum += f
			found = true
		}
	}
	return sum, found
}

func reloadCount(t *testing.T, c *http.Client, result string) float64 {
	t.Helper()
	v, _ := metricValue(adapterMetricsText(t, c), "metricscale_adapter_config_reloads_total", map[string]string{"result": result})
	return v
}

func providerRequests(t *testing.T, c *http.Client, provider, metric string) float64 {
	t.Helper()
	v, _ := metricValue(adapterMetricsText(t, c), "metricscale_adapter_requests_total", map[string]string{"provider": provider, "metric": metric, "code": "200"})
	return v
}

var configInfoLine = regexp.MustCompile(`(?m)^metricscale_adapter_config_info\{hash="([^"]*)"\} 1$`)

func configHash(t *testing.T, c *http.Client) string {
	t.Helper()
	m := configInfoLine.FindStringSubmatch(adapterMetricsText(t, c))
	if m == nil {
		return ""
	}
	return m[1]
}

func reloadAdapterPid(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.Dir, "run", "metricscale-adapter.pid"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func procCmdline(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(data), "\x00", " ")
}

func procEnviron(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(data), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}
