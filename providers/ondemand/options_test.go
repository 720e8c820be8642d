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

func TestFeedOptions(t *testing.T) {
	t.Parallel()
	d := func(s string) *metav1.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Duration{Duration: v}
	}
	for _, tc := range []struct {
		name    string
		o       FeedOptions
		want    Feed // after withDefaults
		wantErr string
	}{
		{"defaults", FeedOptions{}, Feed{Interval: time.Second, MaxPolled: 1000, Lease: DefaultFeedLease}, ""},
		{"set", FeedOptions{FeedPollInterval: d("250ms"), FeedMaxPolledMetrics: 10}, Feed{Interval: 250 * time.Millisecond, MaxPolled: 10, Lease: DefaultFeedLease}, ""},
		{"off", FeedOptions{FeedPollInterval: d("0s")}, Feed{Interval: -1, MaxPolled: 1000, Lease: DefaultFeedLease}, ""},
		{"negative interval", FeedOptions{FeedPollInterval: d("-1s")}, Feed{}, "o.feedPollInterval: must not be negative"},
		{"negative cap", FeedOptions{FeedMaxPolledMetrics: -1}, Feed{}, "o.feedMaxPolledMetrics: must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var errs options.Errors
			tc.o.Validate("o", &errs)
			err := errs.Err()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate() = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			if got := tc.o.Feed().withDefaults(); got != tc.want {
				t.Errorf("Feed() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
