//go:build e2e

package e2e

// Helpers for tests against the local cluster's Prometheus (hack/cluster.sh runs it on
// 127.0.0.1:9090, scraping hack/exporter every second):
//
//   - SetExporterSeries / ResetExporter set the values of series the exporter serves
//     (for example queue depths), which Prometheus sees within about two seconds;
//   - the exporter also serves cAdvisor series for the pods on the kwok nodes, from their
//     usage annotations (UsageCPUAnnotation, UsageMemoryAnnotation): see hack/exporter;
//   - StopPrometheus / StartPrometheus make a Prometheus outage;
//   - QueryPrometheus and WaitPrometheusSeries read what Prometheus answers.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	localcluster "github.com/metricscale/metricscale/hack/cluster"
)

// RequirePrometheus skips the test when the cluster runs without Prometheus.
func (c *Cluster) RequirePrometheus(t *testing.T) {
	t.Helper()
	if c.PrometheusURL == "" || c.ExporterURL == "" {
		t.Skip("the local cluster runs without Prometheus and its exporter (hack/cluster.sh up --no-prometheus?); " +
			"restart it with: hack/cluster.sh down && hack/cluster.sh up")
	}
}

// SetExporterSeries adds series to the exporter, or replaces the values of those it
// already serves with the same name and labels. text holds lines of the Prometheus text
// format without timestamps, for example
//
//	queue_messages_ready{namespace="default",queue="orders"} 12
//
// Prometheus scrapes the exporter every second (honor_labels: the labels stay as given;
// Prometheus adds job="exporter" and instance="127.0.0.1:9105").
func (c *Cluster) SetExporterSeries(ctx context.Context, text string) error {
	return c.exporterPost(ctx, "/set", text)
}

// ResetExporter removes every series set with SetExporterSeries (not the pod and node
// series). Prometheus marks them stale at its next scrape.
func (c *Cluster) ResetExporter(ctx context.Context) error {
	return c.exporterPost(ctx, "/reset", "")
}

func (c *Cluster) exporterPost(ctx context.Context, path, body string) error {
	if c.ExporterURL == "" {
		return errors.New("exporter" + path + ": the exporter does not run in this cluster (hack/cluster.sh up --no-prometheus?)")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.ExporterURL+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("exporter %s: %w (is it running? hack/cluster.sh status)", path, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("exporter %s: HTTP %d: %s", path, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	return nil
}

// StopPrometheus stops the cluster's Prometheus (hack/cluster.sh stop-prometheus): its
// port refuses connections until StartPrometheus. The cluster counts it as paused, not
// failed; a test that stops it should start it again in a t.Cleanup.
func (c *Cluster) StopPrometheus(ctx context.Context) error {
	if c.PrometheusURL == "" {
		return errors.New("stop Prometheus: the cluster runs without Prometheus")
	}
	return c.command("hack/cluster.sh stop-prometheus", func(lc *localcluster.Cluster) error { return lc.StopPrometheus(ctx) })
}

// StartPrometheus starts the cluster's Prometheus again on the same data (the samples
// from before the outage stay) and returns once it has scraped the exporter again,
// which takes about 6 s. It does nothing when Prometheus runs.
func (c *Cluster) StartPrometheus(ctx context.Context) error {
	if c.PrometheusURL == "" {
		return errors.New("start Prometheus: the cluster runs without Prometheus")
	}
	return c.command("hack/cluster.sh start-prometheus", func(lc *localcluster.Cluster) error { return lc.StartPrometheus(ctx) })
}

// PromSample is one element of a Prometheus instant query's result.
type PromSample struct {
	Labels map[string]string // with __name__ when the result keeps it
	Value  float64
}

func (s PromSample) String() string {
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, s.Labels[k])
	}
	return fmt.Sprintf("%s{%s} %s", s.Labels["__name__"], strings.Join(parts, ","), strconv.FormatFloat(s.Value, 'g', -1, 64))
}

// QueryPrometheus evaluates promql now with /api/v1/query and returns the samples of
// its result (a scalar result is one sample without labels).
func (c *Cluster) QueryPrometheus(ctx context.Context, promql string) ([]PromSample, error) {
	if c.PrometheusURL == "" {
		return nil, errors.New("query Prometheus: the cluster runs without Prometheus")
	}
	u := c.PrometheusURL + "/api/v1/query?" + url.Values{"query": {promql}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", promql, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", promql, err)
	}
	var r struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("query %s: HTTP %d, not a Prometheus answer: %.300s", promql, resp.StatusCode, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s: %s", promql, r.ErrorType, r.Error)
	}
	switch r.Data.ResultType {
	case "vector":
		var v []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &v); err != nil {
			return nil, fmt.Errorf("query %s: %w", promql, err)
		}
		out := make([]PromSample, 0, len(v))
		for _, e := range v {
			f, err := promValue(e.Value)
			if err != nil {
				return nil, fmt.Errorf("query %s: %w", promql, err)
			}
			out = append(out, PromSample{Labels: e.Metric, Value: f})
		}
		return out, nil
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(r.Data.Result, &v); err != nil {
			return nil, fmt.Errorf("query %s: %w", promql, err)
		}
		f, err := promValue(v)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", promql, err)
		}
		return []PromSample{{Labels: map[string]string{}, Value: f}}, nil
	}
	return nil, fmt.Errorf("query %s: result type %q; want an instant vector or a scalar", promql, r.Data.ResultType)
}

// promValue reads the [time, "value"] pair of the query API.
func promValue(v [2]any) (float64, error) {
	s, ok := v[1].(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", v[1])
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("sample value %q: %w", s, err)
	}
	return f, nil
}

// WaitPrometheusSeries polls Prometheus every 250 ms until promql returns exactly one
// sample whose value equals want (to a relative 1e-9), for at most 30 s unless ctx has
// an earlier deadline. Its error tells what Prometheus answered last.
func (c *Cluster) WaitPrometheusSeries(ctx context.Context, promql string, want float64) error {
	timeout := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	start := time.Now()
	err := Poll(ctx, timeout, 250*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		samples, err := c.QueryPrometheus(ctx, promql)
		if err != nil {
			return false, "", err
		}
		switch len(samples) {
		case 0:
			return false, "no series (empty result)", nil
		case 1:
			got := samples[0].Value
			return equalFloat(got, want), "value " + samples[0].String(), nil
		}
		lines := make([]string, len(samples))
		for i, s := range samples {
			lines[i] = s.String()
		}
		return false, fmt.Sprintf("%d series, want one (aggregate them, e.g. sum(...)): %s", len(samples), strings.Join(lines, "; ")), nil
	})
	if err != nil {
		return fmt.Errorf("prometheus %s: %q did not become %v within %v: %w", c.PrometheusURL, promql, want, time.Since(start).Round(100*time.Millisecond), err)
	}
	return nil
}

func equalFloat(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}
