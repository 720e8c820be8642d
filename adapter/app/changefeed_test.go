package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/metricscale/metricscale/adapter/internal/fakekube"
	"github.com/metricscale/metricscale/adapter/internal/testenv"
	"github.com/metricscale/metricscale/providers/changefeed"
)

// TestChangeFeedInProcess runs the real adapter and subscribes to its change
// feed over TLS through its authentication and authorization: pushes that
// change a value are announced, pushes that do not are not, and only a user
// granted the non-resource URL /changes may subscribe. Over HTTP/1.1, the
// default, and HTTP/2, which --disable-http2-serving=false turns on: an
// idle HTTP/2 stream must survive its write deadlines.
func TestChangeFeedInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	for _, tc := range []struct {
		name      string
		args      []string
		wantMajor int
	}{
		{"HTTP/1.1 by default", nil, 1},
		{"HTTP/2 when enabled", []string{"--disable-http2-serving=false"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testChangeFeed(t, tc.wantMajor, tc.args...)
		})
	}
}

func testChangeFeed(t *testing.T, wantMajor int, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, err := testenv.Start(ctx, t.TempDir(), append([]string{"--change-feed-heartbeat=1s"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	const feedToken, feedUser = "feed-token", "system:serviceaccount:metricscale:metricscale-autoscaler"
	a.Fake.AddToken(feedToken, fakekube.User{Name: feedUser, Groups: []string{"system:serviceaccounts"}})
	a.Fake.AllowPath(feedUser, "get", changefeed.Path)

	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"anonymous", "", http.StatusUnauthorized},
		{"a user without the grant", testenv.NobodyToken, http.StatusForbidden},
		{"the HPA controller, which may read metrics only", testenv.HPAToken, http.StatusForbidden},
	} {
		code, body, err := a.NewClient(a.SecurePort, tc.token, nil).Get(ctx, changefeed.Path)
		if err != nil || code != tc.want {
			t.Errorf("%s: GET %s = %d %q %v, want %d", tc.name, changefeed.Path, code, body, err, tc.want)
		}
	}

	c := a.NewClient(a.SecurePort, feedToken, nil)
	streaming := &http.Client{Transport: c.HTTP.Transport} // no overall timeout
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+changefeed.Path, nil)
	req.Header.Set("Authorization", "Bearer "+feedToken)
	resp, err := streaming.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != wantMajor {
		t.Fatalf("GET %s: %s over %s, want 200 over HTTP major version %d", changefeed.Path, resp.Status, resp.Proto, wantMajor)
	}
	events := make(chan changefeed.Event, 100)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev changefeed.Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				events <- ev
			}
		}
	}()
	next := func(t *testing.T) changefeed.Event {
		t.Helper()
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatal("the feed ended")
				}
				if ev.Type != changefeed.TypeHeartbeat {
					return ev
				}
			case <-ctx.Done():
				t.Fatal("no event from the feed")
			}
		}
	}
	if ev := next(t); ev.Type != changefeed.TypeHello || ev.HeartbeatSeconds != 1 {
		t.Fatalf("first event %+v, want hello with heartbeatSeconds 1", ev)
	}
	push := func(body string) {
		t.Helper()
		if code, msg, err := testenv.Push(ctx, a.PushURL, testenv.PushToken, "text/plain", []byte(body)); err != nil || code != http.StatusNoContent {
			t.Fatalf("push: %d %q %v", code, msg, err)
		}
	}
	push("queue_depth{namespace=\"shop\",queue=\"orders\"} 5\n")
	if ev := next(t); ev.Type != changefeed.TypeChange || ev.Name != "queue_depth" || ev.Namespace != "shop" ||
		ev.Labels["queue"] != "orders" || ev.Labels["namespace"] != "shop" || ev.All {
		t.Fatalf("after a push got %+v, want the change of queue_depth{namespace=shop,queue=orders}", ev)
	}
	// The same value again is no change; the next change is the next event.
	push("queue_depth{namespace=\"shop\",queue=\"orders\"} 5\n")
	push("other_metric 1\n")
	if ev := next(t); ev.Name != "other_metric" {
		t.Fatalf("after pushing an unchanged value got %+v, want the next real change (other_metric)", ev)
	}
	// A quiet feed only beats, and survives that.
	heartbeats := 0
	for heartbeats < 2 {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the feed ended while idle")
			}
			if ev.Type != changefeed.TypeHeartbeat {
				t.Fatalf("idle feed sent %+v", ev)
			}
			heartbeats++
		case <-ctx.Done():
			t.Fatal("no heartbeat")
		}
	}
	push("queue_depth{namespace=\"shop\",queue=\"orders\"} 6\n")
	if ev := next(t); ev.Name != "queue_depth" {
		t.Fatalf("after the quiet time got %+v", ev)
	}
}
