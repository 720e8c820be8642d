package kafka

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/metrics/pkg/apis/external_metrics"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/hack/freeport"
	"github.com/metricscale/metricscale/providers"
)

// queryTimeout is the per-query timeout the registry would give the
// provider (hack/backends/kafka.yaml's timeout).
const queryTimeout = 2 * time.Second

// broker is a test's view of the cluster: a client of its own, independent
// of the provider's, to produce, commit and ask kadm.
type broker struct {
	t   *testing.T
	cl  *kgo.Client
	adm *kadm.Client
}

func dial(t *testing.T, addr string, opts ...kgo.Opt) *broker {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &broker{t: t, cl: cl, adm: kadm.NewClient(cl)}
}

func (b *broker) createTopic(ctx context.Context, topic string, partitions int32) {
	b.t.Helper()
	r, err := b.adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		b.t.Fatalf("creating topic %s: %v", topic, err)
	}
}

// produce writes n records to each partition listed.
func (b *broker) produce(ctx context.Context, topic string, perPartition map[int32]int) {
	b.t.Helper()
	var rs []*kgo.Record
	for p, n := range perPartition {
		for i := 0; i < n; i++ {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprint(i))})
		}
	}
	if err := b.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		b.t.Fatalf("producing to %s: %v", topic, err)
	}
}

func (b *broker) commit(ctx context.Context, group, topic string, at map[int32]int64) {
	b.t.Helper()
	var os kadm.Offsets
	for p, o := range at {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	if err := b.adm.CommitAllOffsets(ctx, group, os); err != nil {
		b.t.Fatalf("committing for group %s: %v", group, err)
	}
}

// kadmLag is the group's lag on topic per partition as kadm computes it.
func (b *broker) kadmLag(ctx context.Context, group, topic string) map[int32]int64 {
	b.t.Helper()
	lags, err := b.adm.Lag(ctx, group)
	if err != nil {
		b.t.Fatal(err)
	}
	l := lags[group]
	if err := l.Error(); err != nil {
		b.t.Fatal(err)
	}
	out := map[int32]int64{}
	for p, ml := range l.Lag[topic] {
		if ml.Err != nil {
			b.t.Fatalf("kadm lag of %s/%d: %v", topic, p, ml.Err)
		}
		out[p] = ml.Lag
	}
	return out
}

func startCluster(t *testing.T, port int, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.Ports(port)}, opts...)...)
	if err != nil {
		t.Fatalf("kfake on port %d: %v", port, err)
	}
	return c
}

// startClusterAnyPort starts kfake on a free port: another test (or package,
// run in parallel) may take the port freeport found before kfake binds it,
// so a bind error is retried on a new one.
func startClusterAnyPort(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, int) {
	t.Helper()
	var err error
	for range 5 {
		port := freeport.For(t)
		var c *kfake.Cluster
		if c, err = kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.Ports(port)}, opts...)...); err == nil {
			return c, port
		}
	}
	t.Fatalf("kfake on a free port: %v", err)
	return nil, 0
}

// writeCounter counts the requests the provider's client writes.
type writeCounter struct{ n atomic.Int64 }

func (w *writeCounter) OnBrokerWrite(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, _ error) {
	w.n.Add(1)
}

func query(p *Provider, metric string, sel string) (*external_metrics.ExternalMetricValueList, error) {
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	s, err := labels.Parse(sel)
	if err != nil {
		return nil, err
	}
	return p.GetExternalMetric(ctx, "default", s, providers.ExternalMetricInfo{Metric: metric})
}

// values maps each item's labels (without the metric's) to its value.
func values(list *external_metrics.ExternalMetricValueList) map[string]int64 {
	out := map[string]int64{}
	for _, it := range list.Items {
		out[labels.Set(it.MetricLabels).String()] = it.Value.Value()
	}
	return out
}

func percentile(d []time.Duration, q float64) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[int(float64(len(d)-1)*q)]
}

// TestIntegrationKfake reads lag from franz-go's kfake through the wire
// protocol: values equal to kadm's, per partition, retention-deleted
// messages, one backend read per TTL, the cluster stopping (a fast 503)
// and a new one on the same port (values again, same provider).
func TestIntegrationKfake(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, port := startClusterAnyPort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	defer func() { c.Close() }()

	const topic, group = "jobs", "workers"
	b := dial(t, addr)
	b.createTopic(ctx, topic, 3)
	// N = 30 produced, k = 4 + 10 + 0 committed
	b.produce(ctx, topic, map[int32]int{0: 10, 1: 10, 2: 10})
	b.commit(ctx, group, topic, map[int32]int64{0: 4, 1: 10, 2: 0})

	clk := clocktesting.NewFakeClock(time.Now())
	var writes writeCounter
	raw := json.RawMessage(fmt.Sprintf(`{"brokers": [%q], "cacheTTL": "10s", "metrics": [
		{"name": "kafka_lag", "group": %q, "topics": [%q]},
		{"name": "kafka_partition_lag", "group": %q, "topics": [%q], "perPartition": true},
		{"name": "kafka_regex_lag", "group": "nobody", "topicRegex": "j.bs", "offsetResetPolicy": "earliest"}]}`,
		addr, group, topic, group, topic))
	p, err := newProvider("kafka-it", raw, providers.Deps{Clock: clk}, kgo.WithHooks(&writes))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	// lag N−k, equal to kadm's
	want := b.kadmLag(ctx, group, topic)
	if fmt.Sprint(want) != fmt.Sprint(map[int32]int64{0: 6, 1: 0, 2: 10}) {
		t.Fatalf("kadm reports %v: the test's commits did not land", want)
	}
	list, err := query(p, "kafka_lag", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := values(list); len(got) != 1 || got["group=workers,topic=jobs"] != 16 {
		t.Errorf("kafka_lag: %v, want group=workers,topic=jobs: 16 (30 produced − 14 committed)", got)
	}
	list, err = query(p, "kafka_partition_lag", "partition in (0,2)")
	if err != nil {
		t.Fatal(err)
	}
	got := values(list)
	for _, part := range []int32{0, 2} {
		k := fmt.Sprintf("group=workers,partition=%d,topic=jobs", part)
		if got[k] != want[part] {
			t.Errorf("kafka_partition_lag %s: %d, kadm says %d (all: %v)", k, got[k], want[part], got)
		}
	}
	if len(got) != 2 {
		t.Errorf("kafka_partition_lag with partition in (0,2): %v, want 2 items", got)
	}
	// a group that never committed, earliest: everything on the log
	list, err = query(p, "kafka_regex_lag", "topic=jobs")
	if err != nil {
		t.Fatal(err)
	}
	if got := values(list); got["group=nobody,topic=jobs"] != 30 {
		t.Errorf("kafka_regex_lag: %v, want 30", got)
	}

	// retention: delete the first 8 records of partition 0 (committed at 4)
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: topic, Partition: 0, At: 8, LeaderEpoch: -1})
	if rs, err := b.adm.DeleteRecords(ctx, del); err != nil || rs.Error() != nil {
		t.Fatalf("deleting records: %v %v", err, rs.Error())
	}
	clk.Step(11 * time.Second)
	list, err = query(p, "kafka_partition_lag", "partition=0")
	if err != nil {
		t.Fatal(err)
	}
	if got := values(list); got["group=workers,partition=0,topic=jobs"] != 2 {
		t.Errorf("partition 0 after deleting to offset 8 with a commit at 4: %v, want 2 (10 − 8), not 6", got)
	}

	// 1,000 queries within one TTL: one read, warm latencies
	clk.Step(11 * time.Second)
	calls, w0 := p.BackendCalls(), writes.n.Load()
	warm := make([]time.Duration, 0, 1000)
	for i := 0; i < 1000; i++ {
		start := time.Now()
		if _, err := query(p, "kafka_lag", ""); err != nil {
			t.Fatal(err)
		}
		warm = append(warm, time.Since(start))
	}
	if n := p.BackendCalls() - calls; n != 1 {
		t.Errorf("1,000 queries within one TTL made %d backend reads, want 1", n)
	}
	t.Logf("1,000 queries within one TTL: %d backend read, %d Kafka requests written", p.BackendCalls()-calls, writes.n.Load()-w0)
	// cold: every query after the TTL
	cold := make([]time.Duration, 0, 100)
	for i := 0; i < 100; i++ {
		clk.Step(11 * time.Second)
		start := time.Now()
		if _, err := query(p, "kafka_lag", ""); err != nil {
			t.Fatal(err)
		}
		cold = append(cold, time.Since(start))
	}
	t.Logf("p99 of a kafka_lag query: warm %s, cold %s (kfake in process)", percentile(warm[1:], 0.99), percentile(cold, 0.99))

	// the cluster stops: a 503 naming the provider, within the query timeout
	c.Close()
	clk.Step(11 * time.Second)
	start := time.Now()
	list, err = query(p, "kafka_lag", "")
	took := time.Since(start)
	if err == nil {
		t.Fatalf("cluster down: got %v, want an error", values(list))
	}
	if list != nil {
		t.Errorf("cluster down: a value came with the error")
	}
	if r := providers.ReasonOf(err); r != providers.ReasonBackend {
		t.Errorf("cluster down: reason %s, want %s: %v", r, providers.ReasonBackend, err)
	}
	if !strings.Contains(err.Error(), `"kafka-it"`) {
		t.Errorf("cluster down: %q does not name the provider", err)
	}
	if took > queryTimeout+time.Second {
		t.Errorf("cluster down: answered in %s, want within the query timeout %s", took, queryTimeout)
	}
	t.Logf("cluster down: %s after %s", err, took.Round(time.Millisecond))

	// a new cluster on the same port: empty (kfake keeps no state), so the
	// test re-creates the topic and commits; the same provider reads again
	c = startCluster(t, port)
	b = dial(t, addr)
	b.createTopic(ctx, topic, 3)
	b.produce(ctx, topic, map[int32]int{0: 5, 1: 5, 2: 5})
	b.commit(ctx, group, topic, map[int32]int64{0: 5, 1: 2})
	deadline := time.Now().Add(20 * time.Second)
	for {
		clk.Step(11 * time.Second)
		list, err = query(p, "kafka_lag", "")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if got := values(list); got["group=workers,topic=jobs"] != 3 {
		t.Errorf("after the restart: %v, want 3 (15 − 12 committed; partition 2 uncommitted, latest)", got)
	}
}

// TestIntegrationSASL: SCRAM-SHA-256 with the password from a file; a
// wrong password fails without appearing in the error.
func TestIntegrationSASL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, port := startClusterAnyPort(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "adapter", "right-pw"))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	defer c.Close()
	b := dial(t, addr, kgo.SASL(scram.Auth{User: "adapter", Pass: "right-pw"}.AsSha256Mechanism()))
	b.createTopic(ctx, "jobs", 1)
	b.produce(ctx, "jobs", map[int32]int{0: 7})
	b.commit(ctx, "g", "jobs", map[int32]int64{0: 2})

	dir := t.TempDir()
	for _, tc := range []struct {
		pw      string
		wantErr bool
	}{{"right-pw", false}, {"wrong-pw", true}} {
		file := filepath.Join(dir, tc.pw)
		if err := os.WriteFile(file, []byte(tc.pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		raw := json.RawMessage(fmt.Sprintf(`{"brokers": [%q], "sasl": {"mechanism": "SCRAM-SHA-256", "username": "adapter",
			"password": {"file": %q}}, "metrics": [{"name": "kafka_lag", "group": "g", "topics": ["jobs"]}]}`, addr, file))
		p, err := newProvider("kafka-sasl", raw, providers.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		list, err := query(p, "kafka_lag", "")
		p.Close()
		switch {
		case tc.wantErr && err == nil:
			t.Errorf("password %s: got %v, want an error", tc.pw, values(list))
		case tc.wantErr && strings.Contains(err.Error(), tc.pw):
			t.Errorf("the error echoes the password: %v", err)
		case !tc.wantErr && err != nil:
			t.Errorf("password %s: %v", tc.pw, err)
		case !tc.wantErr && values(list)["group=g,topic=jobs"] != 5:
			t.Errorf("password %s: %v, want 5", tc.pw, values(list))
		}
		if err != nil {
			t.Logf("password %s: %v", tc.pw, err)
		}
	}
}

// TestKfakeProgram builds hack/kfake, runs it, checks it answers the
// Kafka protocol and stops on SIGTERM.
func TestKfakeProgram(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a program")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "kfake")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "../../hack/kfake")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./hack/kfake: %v\n%s", err, out)
	}
	port := freeport.For(t)
	cmd := exec.Command(bin, "-port", fmt.Sprint(port), "-partitions", "2")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck // already stopped when the test passes
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "ready") {
		t.Fatalf("first line %q, want ready", lines.Text())
	}
	go func() {
		for lines.Scan() {
		}
	}()
	b := dial(t, fmt.Sprintf("127.0.0.1:%d", port))
	// -partitions is the default of a topic created without a count
	r, err := b.adm.CreateTopic(ctx, -1, -1, nil, "auto")
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("creating a topic: %v", err)
	}
	meta, err := b.adm.Metadata(ctx, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(meta.Topics["auto"].Partitions); n != 2 {
		t.Errorf("topic created with the default count has %d partitions, want 2", n)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("kfake after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("kfake did not stop within 10s of SIGTERM")
	}
}
