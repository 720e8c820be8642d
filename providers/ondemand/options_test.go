package ondemand

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/providers/options"
)

func TestMetricOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		m    MetricOptions
		want string // "" means valid
	}{
		{"valid", MetricOptions{Name: "redis_jobs", Namespace: "team-a", Labels: map[string]string{"tier": "gold"}}, ""},
		{"no name", MetricOptions{}, "m.name: required"},
		{"bad name", MetricOptions{Name: "jobs/len"}, "m.name: \"jobs/len\" is not a valid metric name"},
		{"bad namespace", MetricOptions{Name: "a", Namespace: "Team_A"}, "m.namespace: \"Team_A\""},
		{"namespace label", MetricOptions{Name: "a", Labels: map[string]string{"namespace": "x"}}, "m.labels: use namespace"},
		{"bad label value", MetricOptions{Name: "a", Labels: map[string]string{"vhost": "/"}}, "m.labels: label vhost value \"/\""},
		{"negative ttl", MetricOptions{Name: "a", CacheTTL: &metav1.Duration{Duration: -time.Second}}, "m.cacheTTL: must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var errs options.Errors
			tc.m.Validate("m", &errs)
			err := errs.Err()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want valid", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
