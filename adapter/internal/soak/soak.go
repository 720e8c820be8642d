// Package soak is the fault-injection harness of push replication: it runs
// N adapter replicas as real processes (cmd/adapter, built once) against
// the fake kube-apiserver of package fakekube, puts a fault-injecting proxy
// (providers/push/replicationtest) on every path between two replicas,
// pushes to every replica while it injects faults, and checks, per series,
// that every acknowledged push is served by every live replica once the
// faults stop, that no replica ever serves a value older than one it
// served, and that peer connections and heap stay under their bounds.
package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/metricscale/metricscale/adapter/internal/fakekube"
	"github.com/metricscale/metricscale/adapter/internal/testenv"
	"github.com/metricscale/metricscale/hack/freeport"
	"github.com/metricscale/metricscale/providers/push/replicationtest"
)

// Bounds the checker asserts (documented in the adapter README).
const (
	// MaxConnsPerPeer is push.DefaultMaxConnsPerPeer: connections from one
	// replica to one peer, however that peer behaves.
	MaxConnsPerPeer = 2
	// MaxHeapBytes bounds a replica's heap in use in these runs.
	MaxHeapBytes = 256 << 20
)

// Config is one run.
type Config struct {
	Replicas int           // live replicas (one more slot is kept for rolling replacements)
	Series   int           // distinct series pushed
	Workers  int           // concurrent pushers
	Phase    time.Duration // length of each fault phase
	Converge time.Duration // bound on convergence after the faults stop
	Log      func(format string, args ...any)
}

// Report is what a run measured.
type Report struct {
	PushesAcked, PushesFailed int64
	SeriesChecked             int
	ValuesLost                int // (replica, series) not serving the last acknowledged value within the bound
	BackwardsReads            int64
	Reads                     int64
	ConvergeP50, ConvergeP99  time.Duration
	ConvergeMax               time.Duration
	PeakConnsPerPeer          int64            // most connections open from one replica to one peer
	PeakHeap                  map[string]int64 // by replica slot, bytes
	PeakGoroutines            map[string]int64
	Restarts                  int
}

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pushes acknowledged: %d (failed or refused: %d)\n", r.PushesAcked, r.PushesFailed)
	fmt.Fprintf(&b, "series checked: %d\nvalues lost: %d\nbackwards reads: %d (of %d reads)\n", r.SeriesChecked, r.ValuesLost, r.BackwardsReads, r.Reads)
	fmt.Fprintf(&b, "convergence after faults stop: p50 %s, p99 %s, max %s\n", r.ConvergeP50, r.ConvergeP99, r.ConvergeMax)
	fmt.Fprintf(&b, "peak connections from one replica to one peer: %d (bound %d)\n", r.PeakConnsPerPeer, MaxConnsPerPeer)
	slots := make([]string, 0, len(r.PeakHeap))
	for s := range r.PeakHeap {
		slots = append(slots, s)
	}
	sort.Strings(slots)
	for _, s := range slots {
		fmt.Fprintf(&b, "replica %s: peak heap in use %.1f MiB, peak goroutines %d\n", s, float64(r.PeakHeap[s])/(1<<20), r.PeakGoroutines[s])
	}
	fmt.Fprintf(&b, "processes started after the first: %d\n", r.Restarts)
	return b.String()
}

// slot is a place a replica process runs: fixed ports, so the static peer
// lists stay valid across restarts.
type slot struct {
	idx        int
	securePort int
	pushPort   int
	// incarnation counts the processes the slot ran; reads are checked
	// per incarnation.
	mu          sync.Mutex
	cmd         *exec.Cmd
	incarnation int
	live        bool
	exited      chan struct{}
}

// Harness runs the replicas.
type Harness struct {
	cfg    Config
	dir    string
	bin    string
	files  *testenv.Files
	fake   *fakekube.Server
	kube   string
	slots  []*slot
	prox   [][]*replicationtest.Proxy // prox[i][j]: from slot i to slot j
	reader *testenv.Client

	acked    []atomic.Int64 // per series: last acknowledged value
	next     []int64
	ackCount atomic.Int64
	failed   atomic.Int64
	restarts int

	rmu  sync.Mutex
	seen map[string]map[int]int64 // "slot/incarnation" -> series -> most recent value served
	back atomic.Int64
	rds  atomic.Int64

	heap, gor map[string]int64
}

// Build compiles cmd/adapter into dir.
func Build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "adapter")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/metricscale/metricscale/cmd/adapter")
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building cmd/adapter: %w\n%s", err, out)
	}
	return bin, nil
}

// New prepares the slots, the fake API server and the proxies.
func New(cfg Config, dir, bin string) (*Harness, error) {
	files, err := testenv.MakeFiles(dir)
	if err != nil {
		return nil, err
	}
	fake := fakekube.New()
	fake.AddToken(testenv.AdapterToken, fakekube.User{Name: "system:serviceaccount:metricscale:metricscale-adapter"})
	fake.AddToken(testenv.MonitorToken, fakekube.User{Name: testenv.MonitorUser})
	fake.AllowAll(testenv.MonitorUser)
	kube, err := fake.WriteKubeconfig(dir, testenv.AdapterToken)
	if err != nil {
		fake.Close()
		return nil, err
	}
	h := &Harness{cfg: cfg, dir: dir, bin: bin, files: files, fake: fake, kube: kube,
		acked: make([]atomic.Int64, cfg.Series), next: make([]int64, cfg.Series),
		seen: map[string]map[int]int64{}, heap: map[string]int64{}, gor: map[string]int64{}}
	n := cfg.Replicas + 1
	for i := range n {
		sp, err := freeport.Get()
		if err != nil {
			return nil, err
		}
		pp, err := freeport.Get()
		if err != nil {
			return nil, err
		}
		h.slots = append(h.slots, &slot{idx: i, securePort: sp, pushPort: pp})
	}
	h.prox = make([][]*replicationtest.Proxy, n)
	for i := range n {
		h.prox[i] = make([]*replicationtest.Proxy, n)
		for j := range n {
			if i == j {
				continue
			}
			p, err := replicationtest.NewProxy("127.0.0.1:" + strconv.Itoa(h.slots[j].pushPort))
			if err != nil {
				return nil, err
			}
			h.prox[i][j] = p
		}
	}
	h.reader = files.NewClient(0, testenv.MonitorToken, nil)
	h.reader.HTTP.Timeout = 5 * time.Second
	return h, nil
}

// Close stops every process, proxy and the fake API server.
func (h *Harness) Close() {
	for _, s := range h.slots {
		h.kill(s, syscall.SIGKILL)
	}
	for _, row := range h.prox {
		for _, p := range row {
			if p != nil {
				p.Close()
			}
		}
	}
	h.fake.Close()
}

func (h *Harness) logf(format string, args ...any) {
	if h.cfg.Log != nil {
		h.cfg.Log(format, args...)
	}
}

// start runs a process in slot s and waits until /readyz answers 200.
func (h *Harness) start(ctx context.Context, s *slot) error {
	var peers []string
	for j, o := range h.slots {
		if j == s.idx {
			peers = append(peers, "http://127.0.0.1:"+strconv.Itoa(o.pushPort)) // itself: recognised and skipped
			continue
		}
		peers = append(peers, "http://"+h.prox[s.idx][j].Addr())
	}
	s.mu.Lock()
	s.incarnation++
	inc := s.incarnation
	s.mu.Unlock()
	logf, err := os.Create(filepath.Join(h.dir, fmt.Sprintf("replica-%d-%d.log", s.idx, inc)))
	if err != nil {
		return err
	}
	cmd := exec.Command(h.bin,
		"--secure-port="+strconv.Itoa(s.securePort), "--bind-address=127.0.0.1", "--cert-dir="+h.files.CertDir,
		"--kubeconfig="+h.kube, "--authentication-kubeconfig="+h.kube, "--authorization-kubeconfig="+h.kube,
		"--authentication-skip-lookup",
		"--push-bind-address=127.0.0.1", "--push-port="+strconv.Itoa(s.pushPort), "--push-token-file="+h.files.PushTokenFile,
		"--push-peers="+strings.Join(peers, ","), "--push-max-inflight=32",
		"--max-age=1h", "--series-ttl=1h", "--v=1")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting replica %d: %w", s.idx, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	c := h.files.NewClient(s.securePort, "", nil)
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("replica %d exited before it was ready (%s; log %s): %s", s.idx, cmd.ProcessState, logf.Name(), logTail(logf.Name(), 15))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if code, _, err := c.Get(ctx, "/readyz"); err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %d not ready after 90s (log %s)", s.idx, logf.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.mu.Lock()
	s.live = true
	s.mu.Unlock()
	h.logf("replica %d (process %d) ready", s.idx, inc)
	return nil
}

// logTail is the last n lines of a replica's log, for an error that must say why it exited.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// kill stops slot s's process with sig and waits for it.
func (h *Harness) kill(s *slot, sig syscall.Signal) {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.live = false
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

func (h *Harness) liveSlots() []*slot {
	var out []*slot
	for _, s := range h.slots {
		s.mu.Lock()
		if s.live {
			out = append(out, s)
		}
		s.mu.Unlock()
	}
	return out
}

// pushLoop pushes the worker's series, each push to a random live replica,
// every series' values increasing, until stop is closed.
func (h *Harness) pushLoop(w int, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	client := &http.Client{Timeout: 5 * time.Second}
	var mine []int
	for i := w; i < h.cfg.Series; i += h.cfg.Workers {
		mine = append(mine, i)
	}
	const perPush = 10
	for k := 0; ; k++ {
		select {
		case <-stop:
			return
		default:
		}
		live := h.liveSlots()
		if len(live) == 0 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		s := live[rand.IntN(len(live))]
		var body bytes.Buffer
		var batch []int
		for j := range perPush {
			i := mine[(k*perPush+j)%len(mine)]
			h.next[i]++
			batch = append(batch, i)
			fmt.Fprintf(&body, "soak_value{series=\"s%05d\"} %d\n", i, h.next[i])
		}
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(s.pushPort)+"/push", &body)
		req.Header.Set("Authorization", "Bearer "+testenv.PushToken)
		req.Header.Set("Content-Type", "text/plain")
		resp, err := client.Do(req)
		if err != nil {
			h.failed.Add(1)
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			h.failed.Add(1)
			continue
		}
		h.ackCount.Add(1)
		for _, i := range batch {
			h.acked[i].Store(h.next[i])
		}
		time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
	}
}

type extList struct {
	Items []struct {
		MetricLabels map[string]string `json:"metricLabels"`
		Value        resource.Quantity `json:"value"`
	} `json:"items"`
}

// read fetches every series slot s serves and checks none went backwards;
// it returns the values by series index.
func (h *Harness) read(ctx context.Context, s *slot) (map[int]int64, error) {
	s.mu.Lock()
	inc, live := s.incarnation, s.live
	s.mu.Unlock()
	if !live {
		return nil, fmt.Errorf("replica %d is down", s.idx)
	}
	c := *h.reader
	c.Base = "https://127.0.0.1:" + strconv.Itoa(s.securePort)
	code, body, err := c.Get(ctx, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/soak_value")
	if err != nil {
		return nil, err
	}
	if code == http.StatusNotFound {
		return map[int]int64{}, nil
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("replica %d: %d %s", s.idx, code, body)
	}
	var l extList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, err
	}
	out := make(map[int]int64, len(l.Items))
	for _, it := range l.Items {
		i, err := strconv.Atoi(strings.TrimPrefix(it.MetricLabels["series"], "s"))
		if err != nil {
			continue
		}
		out[i] = it.Value.Value()
	}
	h.rds.Add(1)
	key := fmt.Sprintf("%d/%d", s.idx, inc)
	h.rmu.Lock()
	m := h.seen[key]
	if m == nil {
		m = map[int]int64{}
		h.seen[key] = m
	}
	for i, v := range out {
		if v < m[i] {
			h.back.Add(1)
			h.logf("backwards: replica %s series %d served %d after %d", key, i, v, m[i])
		} else {
			m[i] = v
		}
	}
	h.rmu.Unlock()
	return out, nil
}

// readLoop reads every live replica until stop is closed.
func (h *Harness) readLoop(ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
		for _, s := range h.liveSlots() {
			_, _ = h.read(ctx, s)
		}
	}
}

// sampleLoop records peak heap and goroutines per replica.
func (h *Harness) sampleLoop(ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
		for _, s := range h.liveSlots() {
			c := *h.reader
			c.Base = "https://127.0.0.1:" + strconv.Itoa(s.securePort)
			code, body, err := c.Get(ctx, "/metrics")
			if err != nil || code != http.StatusOK {
				continue
			}
			key := strconv.Itoa(s.idx)
			sc := bufio.NewScanner(bytes.NewReader(body))
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				for name, dst := range map[string]map[string]int64{"go_memstats_heap_inuse_bytes ": h.heap, "go_goroutines ": h.gor} {
					if strings.HasPrefix(line, name) {
						if f, err := strconv.ParseFloat(strings.TrimSpace(line[len(name):]), 64); err == nil {
							h.rmu.Lock()
							dst[key] = max(dst[key], int64(f))
							h.rmu.Unlock()
						}
					}
				}
			}
		}
	}
}

func (h *Harness) setAll(f replicationtest.Faults) {
	for _, row := range h.prox {
		for _, p := range row {
			if p != nil {
				p.Set(f)
			}
		}
	}
}

// Run starts the replicas, runs the fault phases while pushing and
// reading, stops the faults and the pushes, and measures convergence.
func (h *Harness) Run(ctx context.Context) (*Report, error) {
	for _, s := range h.slots[:h.cfg.Replicas] {
		if err := h.start(ctx, s); err != nil {
			return nil, err
		}
	}
	stopPush, stopRead := make(chan struct{}), make(chan struct{})
	var pushers, readers sync.WaitGroup
	for w := range h.cfg.Workers {
		pushers.Add(1)
		go h.pushLoop(w, stopPush, &pushers)
	}
	readers.Add(2)
	go h.readLoop(ctx, stopRead, &readers)
	go h.sampleLoop(ctx, stopRead, &readers)
	stopAll := func() {
		select {
		case <-stopPush:
		default:
			close(stopPush)
		}
		pushers.Wait()
		select {
		case <-stopRead:
		default:
			close(stopRead)
		}
		readers.Wait()
	}
	defer stopAll()

	phase := func(name string, f replicationtest.Faults) {
		h.logf("phase: %s", name)
		h.setAll(f)
		time.Sleep(h.cfg.Phase)
	}
	phase("no faults", replicationtest.Faults{})
	phase("delays and reordering", replicationtest.Faults{Delay: 20 * time.Millisecond, Jitter: 200 * time.Millisecond})
	phase("dropped and 429'd forwards", replicationtest.Faults{DropBefore: 0.15, DropAfter: 0.15, TooMany: 0.2, Jitter: 50 * time.Millisecond})
	h.setAll(replicationtest.Faults{})

	// a hung peer: every path to replica 0 accepts and never answers
	h.logf("phase: replica 0 hangs for its peers")
	for i := range h.prox {
		if p := h.prox[i][0]; p != nil {
			p.Set(replicationtest.Faults{Hang: true})
		}
	}
	time.Sleep(h.cfg.Phase)
	h.setAll(replicationtest.Faults{})

	// a killed and restarted replica
	h.logf("phase: replica 1 killed (SIGKILL) and restarted")
	h.kill(h.slots[1], syscall.SIGKILL)
	time.Sleep(h.cfg.Phase / 2)
	if err := h.start(ctx, h.slots[1]); err != nil {
		return nil, err
	}
	h.restarts++

	// a rolling replacement: a new process on the spare slot, then the
	// oldest stopped, until every replica was replaced
	h.logf("phase: rolling replacement of every replica")
	spare := h.slots[h.cfg.Replicas]
	for _, old := range h.liveSlots() {
		if err := h.start(ctx, spare); err != nil {
			return nil, err
		}
		h.restarts++
		h.kill(old, syscall.SIGTERM)
		spare = old
		time.Sleep(h.cfg.Phase / time.Duration(h.cfg.Replicas))
	}

	// a partition that heals: the first live replica cut off from the others
	live := h.liveSlots()
	h.logf("phase: replica %d partitioned from the others", live[0].idx)
	cut := live[0].idx
	for i := range h.prox {
		for j, p := range h.prox[i] {
			if p != nil && (i == cut) != (j == cut) {
				p.Set(replicationtest.Faults{Partitioned: true})
			}
		}
	}
	time.Sleep(h.cfg.Phase)
	h.setAll(replicationtest.Faults{})
	h.logf("faults stopped; pushes stopped")
	close(stopPush)
	pushers.Wait()
	stopAt := time.Now()

	// convergence: every live replica serves every series' last
	// acknowledged value (or a newer one, from a push whose answer was
	// lost) within the bound
	rep := &Report{PushesAcked: h.ackCount.Load(), PushesFailed: h.failed.Load(), SeriesChecked: h.cfg.Series, Restarts: h.restarts}
	var times []time.Duration
	live = h.liveSlots()
	pending := map[*slot]map[int]bool{}
	for _, s := range live {
		m := map[int]bool{}
		for i := range h.cfg.Series {
			if h.acked[i].Load() > 0 {
				m[i] = true
			}
		}
		pending[s] = m
	}
	deadline := stopAt.Add(h.cfg.Converge)
	for {
		left := 0
		for _, s := range live {
			got, err := h.read(ctx, s)
			if err != nil {
				left += len(pending[s])
				continue
			}
			for i := range pending[s] {
				if got[i] >= h.acked[i].Load() {
					delete(pending[s], i)
					times = append(times, time.Since(stopAt))
				}
			}
			left += len(pending[s])
		}
		if left == 0 || time.Now().After(deadline) {
			rep.ValuesLost = left
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopAll()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	if n := len(times); n > 0 {
		rep.ConvergeP50 = times[n/2]
		rep.ConvergeP99 = times[min(n-1, n*99/100)]
		rep.ConvergeMax = times[n-1]
	}
	rep.BackwardsReads, rep.Reads = h.back.Load(), h.rds.Load()
	for _, row := range h.prox {
		for _, p := range row {
			if p != nil {
				_, peak := p.OpenConns()
				rep.PeakConnsPerPeer = max(rep.PeakConnsPerPeer, peak)
			}
		}
	}
	h.rmu.Lock()
	rep.PeakHeap, rep.PeakGoroutines = h.heap, h.gor
	h.rmu.Unlock()
	return rep, nil
}
