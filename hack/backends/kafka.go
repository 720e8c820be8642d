package backends

// Kafka: no broker is packaged for Debian here, so the broker is franz-go's kfake (the fake
// cluster of the client the adapter uses, speaking the real wire protocol) run as a process
// by hack/kfake on 127.0.0.1:19092, 3 partitions per new topic. Install builds it with Go
// into CACHE/bin/kfake when it is missing or older than its sources. It keeps everything
// in memory: a stop loses every topic, record and committed offset, and a start begins
// with an empty cluster. DIR/kafka holds its log (kfake.log) and pid file.

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

//go:embed kafka.yaml
var kafkaFragment []byte

const (
	kafkaPort       = 19092
	kafkaPartitions = 3
	kafkaReady      = 60 * time.Second
	kafkaStopWait   = 30 * time.Second
	// The topic and group of kafka.yaml: kafka_e2e_lag is the group's lag on the topic.
	kafkaTopic = "e2e-jobs"
	kafkaGroup = "e2e-workers"
)

type kafkaBackend struct{}

func init() { register(kafkaBackend{}) }

func (kafkaBackend) Name() string { return "kafka" }

// kfakeBin is where Install builds kfake: it takes the cache root it is given, Start the
// default one (CacheRoot), as the cluster uses.
func kfakeBin(cacheRoot string) string { return filepath.Join(cacheRoot, "bin", "kfake") }

func kafkaAddr() string { return "127.0.0.1:" + strconv.Itoa(kafkaPort) }

// moduleRoot is the metricscale checkout above the working directory (hack/kfake builds
// from it).
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil &&
			strings.HasPrefix(string(b), "module github.com/metricscale/metricscale\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no metricscale checkout (go.mod) above %s", wd)
		}
	}
}

// kfakeStale tells whether bin is missing or older than a source it is built from
// (hack/kfake, go.mod, go.sum: the kfake version).
func kfakeStale(root, bin string) bool {
	st, err := os.Stat(bin)
	if err != nil {
		return true
	}
	newer := errors.New("newer")
	err = filepath.WalkDir(filepath.Join(root, "hack", "kfake"), func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := e.Info(); err == nil && info.ModTime().After(st.ModTime()) {
			return newer
		}
		return nil
	})
	if err != nil {
		return true
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		if info, err := os.Stat(filepath.Join(root, f)); err != nil || info.ModTime().After(st.ModTime()) {
			return true
		}
	}
	return false
}

func (kafkaBackend) Install(ctx context.Context, cacheRoot string, log io.Writer) error {
	root, err := moduleRoot()
	if err != nil {
		return fmt.Errorf("kafka: building kfake: %w", err)
	}
	bin := kfakeBin(cacheRoot)
	if !kfakeStale(root, bin) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	fmt.Fprintf(log, "    building %s from hack/kfake\n", bin)
	// to a temporary name, so a failed build leaves no half-written binary
	cmd := command(ctx, nil, "go", "build", "-o", bin+".tmp", "./hack/kfake")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./hack/kfake failed: %w\n%s", err, out)
	}
	return os.Rename(bin+".tmp", bin)
}

// kafkaReadyIn tells whether the broker logging to logfile said it is ready (in this run's
// log) and accepts connections.
func kafkaReadyIn(logfile string) bool {
	if !portOpen(kafkaPort) {
		return false
	}
	f, err := os.Open(logfile)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "ready") {
			return true
		}
	}
	return false
}

func (kafkaBackend) Start(ctx context.Context, dir string, log io.Writer) error {
	if _, err := absDir(dir); err != nil {
		return err
	}
	bin := kfakeBin(CacheRoot())
	if !executable(bin) {
		return fmt.Errorf("%s is missing: install the kafka backend first (hack/cluster.sh install-backends)", bin)
	}
	d := filepath.Join(mustAbs(dir), "kafka")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	pidfile, logfile := filepath.Join(d, "kfake.pid"), filepath.Join(d, "kfake.log")
	if pid, ok := pidfilePID(pidfile, "kfake"); ok {
		fmt.Fprintf(log, "    kfake already running (pid %d)\n", pid)
		if err := waitUntil(ctx, kafkaReady, func() bool { return kafkaReadyIn(logfile) }); err != nil {
			return fmt.Errorf("kfake is not ready after %s (log %s): %w", kafkaReady, logfile, err)
		}
		return nil
	}
	if err := portsFree("kfake", kafkaPort); err != nil {
		return err
	}
	// a fresh log: the readiness check looks for this run's "ready" line
	if _, err := os.Stat(logfile); err == nil {
		_ = os.Rename(logfile, logfile+".prev")
	}
	p, err := startDaemon(nil, pidfile, logfile, bin, "-port", strconv.Itoa(kafkaPort), "-partitions", strconv.Itoa(kafkaPartitions))
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	if err := waitStarted(ctx, p, kafkaReady, func() bool { return kafkaReadyIn(logfile) }); err != nil {
		if errors.Is(err, errExited) {
			_ = os.Remove(pidfile)
			return fmt.Errorf("kfake exited at start (log %s):\n%s", logfile, tail(logfile, 20))
		}
		return fmt.Errorf("kfake is not ready after %s (log %s): %w\n%s", kafkaReady, logfile, err, tail(logfile, 20))
	}
	fmt.Fprintf(log, "    kfake ready on %s (in memory: empty after every start; pid %d)\n", kafkaAddr(), p.pid)
	return nil
}

// Stop stops the broker: its topics and offsets are gone.
func (kafkaBackend) Stop(ctx context.Context, dir string) error {
	if _, err := absDir(dir); err != nil {
		return err
	}
	return stopPidfile(ctx, filepath.Join(mustAbs(dir), "kafka", "kfake.pid"), "kfake", kafkaPort, kafkaStopWait)
}

func (kafkaBackend) Healthy(ctx context.Context, dir string) error {
	d := filepath.Join(mustAbs(dir), "kafka")
	if _, ok := pidfilePID(filepath.Join(d, "kfake.pid"), "kfake"); !ok {
		return fmt.Errorf("the kfake of %s does not run", d)
	}
	if !kafkaReadyIn(filepath.Join(d, "kfake.log")) {
		return fmt.Errorf("kfake on %s is not ready", kafkaAddr())
	}
	return nil
}

func (kafkaBackend) Env(string) map[string]string {
	return map[string]string{"METRICSCALE_KAFKA_BROKERS": kafkaAddr()}
}

func (kafkaBackend) AdapterConfig(dir string) ([]byte, error) {
	return adapterConfig(kafkaFragment, dir)
}

func (kafkaBackend) Queue() QueueInfo {
	return QueueInfo{Metric: "kafka_e2e_lag", Selector: map[string]string{"topic": kafkaTopic}}
}

type kafkaQueue struct {
	brokers  string
	producer *kgo.Client
	adm      *kadm.Client
	consumer *kgo.Client // the workers: a group member, joined at the first Consume
}

// OpenQueue connects and creates the topic unless it exists (kfake forgets it at a
// restart).
func (kafkaBackend) OpenQueue(ctx context.Context, env map[string]string) (Queue, error) {
	brokers, err := need(env, "METRICSCALE_KAFKA_BROKERS")
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(kafkaTopic))
	if err != nil {
		return nil, fmt.Errorf("kafka: client for %s: %w", brokers, err)
	}
	q := &kafkaQueue{brokers: brokers, producer: producer, adm: kadm.NewClient(producer)}
	if err := q.ensureTopic(ctx); err != nil {
		producer.Close()
		return nil, err
	}
	return q, nil
}

func (q *kafkaQueue) ensureTopic(ctx context.Context) error {
	r, err := q.adm.CreateTopic(ctx, kafkaPartitions, 1, nil, kafkaTopic)
	if err == nil {
		err = r.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafka: creating topic %s: %w", kafkaTopic, err)
	}
	return nil
}

func (q *kafkaQueue) Publish(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Value: []byte("job " + strconv.Itoa(i))}
	}
	if err := q.producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("kafka: producing %d records to %s: %w", n, kafkaTopic, err)
	}
	return nil
}

// Consume polls up to n records (waiting briefly for those just produced) and commits
// them for the group. The first call joins the group, which may take longer than that
// wait: it then returns 0, as a worker's first poll does.
func (q *kafkaQueue) Consume(ctx context.Context, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	if q.consumer == nil {
		c, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(q.brokers, ",")...), kgo.ConsumerGroup(kafkaGroup),
			kgo.ConsumeTopics(kafkaTopic), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return 0, fmt.Errorf("kafka: group client for %s: %w", q.brokers, err)
		}
		q.consumer = c
	}
	pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	fetches := q.consumer.PollRecords(pctx, n)
	cancel()
	var ferr error
	fetches.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && ferr == nil {
			ferr = fmt.Errorf("kafka: fetching %s[%d]: %w", topic, p, err)
		}
	})
	if ferr != nil {
		return 0, ferr
	}
	recs := fetches.Records()
	if len(recs) == 0 {
		return 0, nil
	}
	if err := q.consumer.CommitRecords(ctx, recs...); err != nil {
		return 0, fmt.Errorf("kafka: committing %d records of %s for %s: %w", len(recs), kafkaTopic, kafkaGroup, err)
	}
	return len(recs), nil
}

// Depth is the group's lag as the broker's offsets give it: end − committed per
// partition; a partition the group never committed holds everything still on it
// (kafka.yaml: earliest).
func (q *kafkaQueue) Depth(ctx context.Context) (int, error) {
	start, err := q.adm.ListStartOffsets(ctx, kafkaTopic)
	if err == nil {
		err = start.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("kafka: the start offsets of %s: %w", kafkaTopic, err)
	}
	end, err := q.adm.ListEndOffsets(ctx, kafkaTopic)
	if err == nil {
		err = end.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("kafka: the end offsets of %s: %w", kafkaTopic, err)
	}
	committed, err := q.adm.FetchOffsets(ctx, kafkaGroup)
	if err == nil {
		err = committed.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		// kfake's answer for a group that never committed (a restart forgets it)
		committed, err = nil, nil
	}
	if err != nil {
		return 0, fmt.Errorf("kafka: the offsets of %s: %w", kafkaGroup, err)
	}
	var total int64
	end.Each(func(e kadm.ListedOffset) {
		from := start[e.Topic][e.Partition].Offset
		if c, ok := committed.Lookup(e.Topic, e.Partition); ok && c.At >= from {
			from = c.At
		}
		if e.Offset > from {
			total += e.Offset - from
		}
	})
	return int(total), nil
}

// Drain commits the group at the topic's end offsets: everything on it counts as
// consumed. A broker refuses that for a group with members: the workers leave first (and
// join again at the next Consume).
func (q *kafkaQueue) Drain(ctx context.Context) error {
	if q.consumer != nil {
		q.consumer.Close()
		q.consumer = nil
	}
	if err := q.ensureTopic(ctx); err != nil {
		return err
	}
	end, err := q.adm.ListEndOffsets(ctx, kafkaTopic)
	if err == nil {
		err = end.Error()
	}
	if err != nil {
		return fmt.Errorf("kafka: the end offsets of %s: %w", kafkaTopic, err)
	}
	if err := q.adm.CommitAllOffsets(ctx, kafkaGroup, end.Offsets()); err != nil {
		return fmt.Errorf("kafka: committing %s at the end of %s: %w", kafkaGroup, kafkaTopic, err)
	}
	return nil
}

func (q *kafkaQueue) Close() error {
	if q.consumer != nil {
		q.consumer.Close()
	}
	q.producer.Close()
	return nil
}
