package redis

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers/ondemand"
)

func TestValidateRejects(t *testing.T) {
	t.Parallel()
	const list = `{"name":"jobs","type":"listLength","key":"jobs"}`
	for _, tc := range []struct {
		name, raw string
		want      []string // each must be in the error
	}{
		{"no options", ``, []string{"options: required"}},
		{"null options", `null`, []string{"options: required"}},
		{"unknown field", `{"address":"h:1","metrics":[` + list + `],"passwd":"x"}`, []string{"options:", `unknown field "passwd"`}},
		{"no address", `{"metrics":[` + list + `]}`, []string{"options.address: required"}},
		{"bad port", `{"address":"h:99999","metrics":[` + list + `]}`, []string{"options.address: port"}},
		{"no host", `{"address":":6379","metrics":[` + list + `]}`, []string{"options.address:", "no host"}},
		{"bad scheme", `{"address":"http://h:1","metrics":[` + list + `]}`, []string{"options.address: scheme \"http\""}},
		{"password in URL", `{"address":"redis://u:s3cret@h:1","metrics":[` + list + `]}`, []string{"options.address: must not hold credentials"}},
		{"bad db path", `{"address":"redis://h:1/x","metrics":[` + list + `]}`, []string{"options.address: path"}},
		{"db clash", `{"address":"redis://h:1/2","db":3,"metrics":[` + list + `]}`, []string{"options.address: database 2"}},
		{"negative db", `{"address":"h:1","db":-1,"metrics":[` + list + `]}`, []string{"options.db: must not be negative"}},
		{"username without password", `{"address":"h:1","username":"u","metrics":[` + list + `]}`, []string{"options.password: required with username"}},
		{"password both", `{"address":"h:1","password":{"file":"/f","env":"E"},"metrics":[` + list + `]}`, []string{"options.password: set file or env"}},
		{"password inline", `{"address":"h:1","password":"s3cret","metrics":[` + list + `]}`, []string{"options.password: an inline secret is refused"}},
		{"tls cert without key", `{"address":"h:1","tls":{"certFile":"/c"},"metrics":[` + list + `]}`, []string{"options.tls.certFile"}},
		{"negative cacheTTL", `{"address":"h:1","cacheTTL":"-1s","metrics":[` + list + `]}`, []string{"options.cacheTTL: must not be negative"}},
		{"negative maxKeys", `{"address":"h:1","maxKeys":-1,"metrics":[` + list + `]}`, []string{"options.maxKeys"}},
		{"negative scanCount", `{"address":"h:1","scanCount":-1,"metrics":[` + list + `]}`, []string{"options.scanCount"}},
		{"no metrics", `{"address":"h:1"}`, []string{"options.metrics: required"}},
		{"no name", `{"address":"h:1","metrics":[{"type":"listLength","key":"k"}]}`, []string{"options.metrics[0].name: required"}},
		{"bad name", `{"address":"h:1","metrics":[{"name":"Bad Name","type":"listLength","key":"k"}]}`, []string{"options.metrics[0].name:"}},
		{"duplicate name", `{"address":"h:1","metrics":[` + list + `,` + list + `]}`, []string{"options.metrics[1].name:", "metrics[0]"}},
		{"no type", `{"address":"h:1","metrics":[{"name":"m","key":"k"}]}`, []string{"options.metrics[0].type: required"}},
		{"bad type", `{"address":"h:1","metrics":[{"name":"m","type":"llen","key":"k"}]}`, []string{"options.metrics[0].type: \"llen\""}},
		{"no key", `{"address":"h:1","metrics":[{"name":"m","type":"listLength"}]}`, []string{"options.metrics[0].key: required"}},
		{"key and pattern", `{"address":"h:1","metrics":[{"name":"m","type":"listLength","key":"k","keyPattern":"k*"}]}`, []string{"options.metrics[0].keyPattern: set key or keyPattern"}},
		{"group on a list", `{"address":"h:1","metrics":[{"name":"m","type":"listLength","key":"k","group":"g"}]}`, []string{"options.metrics[0].group:"}},
		{"group on a stream length", `{"address":"h:1","metrics":[{"name":"m","type":"streamLength","key":"k","group":"g"}]}`, []string{"options.metrics[0].group:"}},
		{"bad namespace", `{"address":"h:1","metrics":[{"name":"m","type":"listLength","key":"k","namespace":"Not_OK"}]}`, []string{"options.metrics[0].namespace:"}},
		{"namespace label", `{"address":"h:1","metrics":[{"name":"m","type":"listLength","key":"k","labels":{"namespace":"a"}}]}`, []string{"options.metrics[0].labels:"}},
		{"negative metric cacheTTL", `{"address":"h:1","metrics":[{"name":"m","type":"listLength","key":"k","cacheTTL":"-2s"}]}`, []string{"options.metrics[0].cacheTTL:"}},
		{"bad labelsFrom", `{"address":"h:1","metrics":[{"name":"m","type":"listLength","keyPattern":"k*","labelsFrom":"("}]}`, []string{"options.metrics[0].labelsFrom:"}},
		{"labelsFrom without names", `{"address":"h:1","metrics":[{"name":"m","type":"listLength","keyPattern":"k*","labelsFrom":"^k(.*)$"}]}`, []string{"options.metrics[0].labelsFrom: has no named group"}},
		{"labelsFrom bad label", `{"address":"h:1","metrics":[{"name":"m","type":"listLength","keyPattern":"k*","labelsFrom":"^k(?P<_x>.*)$"}]}`, []string{"options.metrics[0].labelsFrom: group \"_x\""}},
		{"labelsFrom replaces key", `{"address":"h:1","metrics":[{"name":"m","type":"listLength","keyPattern":"k*","labelsFrom":"^(?P<key>.*)$"}]}`, []string{"options.metrics[0].labelsFrom: group \"key\" would replace"}},
		{"labelsFrom replaces group", `{"address":"h:1","metrics":[{"name":"m","type":"streamLag","keyPattern":"k*","labelsFrom":"^(?P<group>.*)$"}]}`, []string{"options.metrics[0].labelsFrom: group \"group\" would replace"}},
		{"labelsFrom clashes with labels", `{"address":"h:1","metrics":[{"name":"m","type":"listLength","keyPattern":"k*","labels":{"q":"x"},"labelsFrom":"^k(?P<q>.*)$"}]}`, []string{"options.metrics[0].labelsFrom: group \"q\" is also in labels"}},
		{"labelsFrom misses key", `{"address":"h:1","metrics":[{"name":"m","type":"listLength","key":"jobs","labelsFrom":"^q:(?P<q>.*)$"}]}`, []string{"options.metrics[0].labelsFrom: does not match key \"jobs\""}},
		{"bad feed", `{"address":"h:1","feed":"push","metrics":[` + list + `]}`, []string{"options.feed: \"push\""}},
		{"keyspace without feed", `{"address":"h:1","feed":"keyspace","feedPollInterval":"0s","metrics":[` + list + `]}`, []string{"options.feed: keyspace needs the change feed"}},
		{"zero reconcile", `{"address":"h:1","feed":"keyspace","feedReconcileInterval":"0s","metrics":[` + list + `]}`, []string{"options.feedReconcileInterval: must be positive"}},
		{"second entry", `{"address":"h:1","metrics":[` + list + `,{"name":"b","type":"streamBacklog"}]}`, []string{"options.metrics[1].key: required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Factory{}.Validate("options", []byte(tc.raw))
			if err == nil {
				t.Fatalf("Validate(%s) = nil, want an error", tc.raw)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate(%s) = %q, want it to contain %q", tc.raw, err, w)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error echoes the password: %q", err)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw string
		addr      string
		db        int
		tls       bool
		ttl       time.Duration
	}{
		{"host:port", `{"address":"127.0.0.1:16379","metrics":[{"name":"m","type":"listLength","key":"k"}]}`, "127.0.0.1:16379", 0, false, ondemand.DefaultCacheTTL},
		{"host only", `{"address":"redis.example","metrics":[{"name":"m","type":"streamLength","key":"k"}]}`, "redis.example:6379", 0, false, ondemand.DefaultCacheTTL},
		{"URL with db", `{"address":"redis://r:7000/3","cacheTTL":"5s","metrics":[{"name":"m","type":"streamPending","key":"k","group":"g"}]}`, "r:7000", 3, false, 5 * time.Second},
		{"rediss", `{"address":"rediss://r","username":"u","password":{"env":"P"},"metrics":[{"name":"m","type":"streamBacklog","keyPattern":"s:*","labelsFrom":"^s:(?P<queue>.+)$"}]}`, "r:6379", 0, true, ondemand.DefaultCacheTTL},
		{"IPv6", `{"address":"[::1]:6380","db":2,"tls":{"insecureSkipVerify":true},"cacheTTL":"0s","metrics":[{"name":"m","type":"streamLag","key":"k"}]}`, "[::1]:6380", 2, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if err := (Factory{}).Validate("options", []byte(tc.raw)); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			s, err := decodeOptions("options", []byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			if s.addr != tc.addr || s.db != tc.db || s.tlsOn != tc.tls || s.ttl != tc.ttl {
				t.Errorf("settings: addr %q db %d tls %v ttl %s; want %q %d %v %s", s.addr, s.db, s.tlsOn, s.ttl, tc.addr, tc.db, tc.tls, tc.ttl)
			}
			if s.maxKeys != DefaultMaxKeys || s.scanCount != DefaultScanCount {
				t.Errorf("maxKeys %d scanCount %d, want the defaults", s.maxKeys, s.scanCount)
			}
		})
	}
}

// TestKeyLabelsRemembered: a key's labels are made once and shared by
// every read of its series, a key labelsFrom does not match is remembered
// as such, and the memo forgets everything rather than grow past its bound.
func TestKeyLabelsRemembered(t *testing.T) {
	t.Parallel()
	s, err := decodeOptions("options", []byte(`{"address":"h:1","maxKeys":50,"metrics":[{"name":"m","type":"listLength","keyPattern":"q:*","labelsFrom":"^q:(?P<queue>[a-z]+)$"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := &s.metrics[0]
	a1, ok1 := m.keyLabels("q:orders")
	a2, ok2 := m.keyLabels("q:orders")
	if !ok1 || !ok2 || a1["queue"] != "orders" || a1["key"] != "q:orders" {
		t.Fatalf("labels of q:orders: %v %v, %v %v", a1, ok1, a2, ok2)
	}
	if reflect.ValueOf(a1).UnsafePointer() != reflect.ValueOf(a2).UnsafePointer() {
		t.Error("q:orders' labels were made twice")
	}
	for range 2 {
		if l, ok := m.keyLabels("q:42"); ok || l != nil {
			t.Errorf("q:42 (labelsFrom does not match): %v, %v; want no series", l, ok)
		}
	}
	if m.labels.limit != 100 {
		t.Errorf("remembers up to %d keys, want twice maxKeys (100)", m.labels.limit)
	}
	for i := range m.labels.limit {
		m.keyLabels(fmt.Sprintf("q:k%d", i))
	}
	if n := len(m.labels.byKey); n > m.labels.limit {
		t.Errorf("%d keys remembered, want at most %d", n, m.labels.limit)
	}
	if b, ok := m.keyLabels("q:orders"); !ok || b["queue"] != "orders" {
		t.Errorf("q:orders after the memo was cleared: %v, %v", b, ok)
	}
}
