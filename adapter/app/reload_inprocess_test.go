package app_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metricscale/metricscale/adapter/internal/testenv"
)

// TestConfigReloadInProcess runs the real adapter with --config and
// rewrites the file: the watch started by Run applies a new route and
// provider (the API server answers from it, discovery lists it, the pushed
// series of the unchanged provider stay), then refuses an invalid file.
func TestConfigReloadInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	const initial = `providers:
- name: mem
  type: memory
routes:
- metric: "*"
  provider: mem
`
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(file+".tmp", []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".tmp", file); err != nil {
			t.Fatal(err)
		}
	}
	write(initial)
	a, err := testenv.Start(ctx, dir, "--config="+file)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	hpa := a.NewClient(a.SecurePort, testenv.HPAToken, nil)
	monitor := a.NewClient(a.SecurePort, testenv.MonitorToken, nil)

	push := func(body string) {
		t.Helper()
		if code, msg, err := testenv.Push(ctx, a.PushURL, testenv.PushToken, "text/plain", []byte(body)); err != nil || code != http.StatusNoContent {
			t.Fatalf("push: %d %q %v", code, msg, err)
		}
	}
	// until returns once get's body satisfies ok, or fails the test.
	until := func(what string, c *testenv.Client, path string, ok func(code int, body string) bool) string {
		t.Helper()
		var code int
		var body []byte
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if code, body, err = c.Get(ctx, path); err == nil && ok(code, string(body)) {
				return string(body)
			}
		}
		t.Fatalf("never saw %s: GET %s: %d %s %v", what, path, code, body, err)
		return ""
	}
	value := func(code int, body, want string) bool {
		var l struct {
			Items []struct{ Value string } `json:"items"`
		}
		return code == 200 && json.Unmarshal([]byte(body), &l) == nil && len(l.Items) == 1 && l.Items[0].Value == want
	}
	counter := func(body, result string) float64 {
		m := regexp.MustCompile(`(?m)^metricscale_adapter_config_reloads_total\{result="` + result + `"\} (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			return -1
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}

	hashInfo := func(content string) string {
		sum := sha256.Sum256([]byte(content))
		return `metricscale_adapter_config_info{hash="sha256:` + hex.EncodeToString(sum[:]) + `"} 1`
	}
	until("the first config's hash", monitor, "/metrics", func(c int, b string) bool { return strings.Contains(b, hashInfo(initial)) })
	push(`kept{namespace="default"} 5` + "\n")
	until("kept = 5", hpa, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/kept", func(c int, b string) bool { return value(c, b, "5") })
	before := until("the reload counters", monitor, "/metrics", func(c int, b string) bool { return c == 200 && counter(b, "success") >= 0 })

	// a second provider takes new_* ahead of the catch-all
	const second = `providers:
- name: mem
  type: memory
- name: second
  type: memory
routes:
- metric: "new_*"
  provider: second
  kind: external
- metric: "*"
  provider: mem
`
	write(second)
	until("a successful reload", monitor, "/metrics", func(c int, b string) bool {
		return counter(b, "success") > counter(before, "success") && strings.Contains(b, hashInfo(second))
	})
	push(`new_jobs{namespace="default"} 9` + "\n")
	until("new_jobs = 9", hpa, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/new_jobs", func(c int, b string) bool { return value(c, b, "9") })
	until("kept = 5 after the reload", hpa, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/kept", func(c int, b string) bool { return value(c, b, "5") })
	until("discovery listing new_jobs", hpa, "/apis/external.metrics.k8s.io/v1beta1", func(c int, b string) bool { return strings.Contains(b, `"new_jobs"`) })
	until("new_jobs answered by provider second", monitor, "/metrics", func(c int, b string) bool {
		return regexp.MustCompile(`metricscale_adapter_requests_total\{[^}]*metric="new_jobs"[^}]*provider="second"`).MatchString(b)
	})

	mid := until("metrics", monitor, "/metrics", func(c int, b string) bool { return c == 200 })
	write("providers: [\n")
	until("a refused reload", monitor, "/metrics", func(c int, b string) bool { return counter(b, "failure") > counter(mid, "failure") })
	until("new_jobs = 9 after the refused reload", hpa, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/new_jobs", func(c int, b string) bool { return value(c, b, "9") })
	after := until("metrics", monitor, "/metrics", func(c int, b string) bool { return c == 200 })
	if !strings.Contains(after, "metricscale_adapter_config_last_reload_successful 0") || !strings.Contains(after, hashInfo(second)) {
		t.Error("after a refused reload: config_last_reload_successful is not 0, or config_info does not name the running config")
	}
}
