package redis

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/providers"

	"github.com/metricscale/metricscale/hack/freeport"
)

const (
	serverBin = "/usr/bin/redis-server"
	cliBin    = "/usr/bin/redis-cli"
	// the least-privilege user the README recommends
	aclUser     = "metricscale"
	aclPassword = "s3cret-Pa55"
	aclRules    = "resetkeys %R~* resetchannels -@all +llen +xlen +xinfo|groups +scan"
)

// server is a real redis-server on a free 127.0.0.1 port, data in a
// temporary folder.
type server struct {
	t    *testing.T
	dir  string
	conf string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

func needBinaries(t *testing.T) {
	t.Helper()
	for _, b := range []string{serverBin, cliBin} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("%s is not installed (Debian package redis-server): %v", b, err)
		}
	}
}

// startServer writes a config (extra lines appended) and starts the server.
func startServer(t *testing.T, extra ...string) *server {
	t.Helper()
	s := &server{t: t, dir: t.TempDir(), port: freeport.For(t)}
	s.conf = filepath.Join(s.dir, "redis.conf")
	lines := []string{
		"bind 127.0.0.1", "port " + strconv.Itoa(s.port), "dir " + s.dir,
		// saved on shutdown, so a restart finds the data again
		"save 3600 1", "appendonly no", "daemonize no", "logfile " + filepath.Join(s.dir, "redis.log"),
		"user default on nopass ~* &* +@all",
		"user " + aclUser + " on >" + aclPassword + " " + aclRules,
		// a user without LLEN, to see a refused command
		"user nolist on >" + aclPassword + " resetkeys %R~* -@all +xlen +xinfo|groups +scan",
	}
	lines = append(lines, extra...)
	if err := os.WriteFile(s.conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

func (s *server) start() {
	s.t.Helper()
	s.cmd = exec.Command(serverBin, s.conf)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if out, err := exec.Command(cliBin, "-p", strconv.Itoa(s.port), "PING").CombinedOutput(); err == nil && strings.TrimSpace(string(out)) == "PONG" {
			return
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.t.Fatalf("redis-server exited: %s", log)
		case <-time.After(50 * time.Millisecond):
		}
	}
	s.t.Fatalf("redis-server on port %d did not answer PING within 20s", s.port)
}

// stop stops the server as an operator does (SIGTERM: it saves, then
// exits) and waits until it has.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// cli runs redis-cli against the server as the default user.
func (s *server) cli(args ...string) string {
	s.t.Helper()
	out, err := exec.Command(cliBin, append([]string{"-p", strconv.Itoa(s.port)}, args...)...).Output()
	if err != nil {
		s.t.Fatalf("redis-cli %v: %v", args, err)
	}
	return strings.TrimRight(string(out), "\n")
}

func (s *server) cliInt(args ...string) int64 {
	s.t.Helper()
	out := s.cli(args...)
	n, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		s.t.Fatalf("redis-cli %v = %q: %v", args, out, err)
	}
	return n
}

// cliGroups is redis-cli's XINFO GROUPS: group → field → value ("" for nil).
func (s *server) cliGroups(stream string) map[string]map[string]string {
	s.t.Helper()
	lines := strings.Split(s.cli("XINFO", "GROUPS", stream), "\n")
	out := map[string]map[string]string{}
	var cur map[string]string
	for i := 0; i+1 < len(lines); i += 2 {
		if lines[i] == "name" {
			cur = map[string]string{}
			out[lines[i+1]] = cur
		}
		cur[lines[i]] = lines[i+1]
	}
	return out
}

func query(ctx context.Context, p *Provider, metric string) (map[string]float64, error) {
	list, err := p.GetExternalMetric(ctx, "default", labels.Everything(), providers.ExternalMetricInfo{Metric: metric})
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, it := range list.Items {
		out[labels.Set(it.MetricLabels).String()] = it.Value.AsApproximateFloat64()
	}
	return out, nil
}

func newReal(t *testing.T, name string, opts map[string]any) *Provider {
	t.Helper()
	raw, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := (Factory{}).Validate("options", raw); err != nil {
		t.Fatalf("options %s: %v", raw, err)
	}
	pp, err := Factory{}.New(name, raw, providers.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	p := pp.(*Provider)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func p99(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[(len(d)*99)/100]
}

var realMetrics = []map[string]any{
	{"name": "redis_jobs_length", "type": "listLength", "key": "e2e-jobs"},
	{"name": "redis_tenant_jobs", "type": "listLength", "keyPattern": "jobs:*", "labelsFrom": "^jobs:(?P<queue>.+)$"},
	{"name": "redis_events_length", "type": "streamLength", "key": "events"},
	{"name": "redis_events_pending", "type": "streamPending", "key": "events"},
	{"name": "redis_events_lag", "type": "streamLag", "key": "events"},
	{"name": "redis_events_backlog", "type": "streamBacklog", "key": "events"},
	{"name": "redis_broken_lag", "type": "streamLag", "key": "broken"},
	{"name": "redis_trimmed_backlog", "type": "streamBacklog", "key": "trimmed"},
}

// TestRealServer reads every metric kind from a real redis-server, as the
// least-privilege ACL user, and checks it against redis-cli; then stops and
// restarts the server under the same provider.
func TestRealServer(t *testing.T) {
	needBinaries(t)
	t.Parallel()
	srv := startServer(t)
	ctx := context.Background()
	admin := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer admin.Close()

	const jobs, entries, delivered, acked = 37, 20, 12, 5
	for i := range jobs {
		admin.RPush(ctx, "e2e-jobs", fmt.Sprintf("job-%d", i))
	}
	admin.RPush(ctx, "jobs:orders", "a", "b", "c")
	admin.RPush(ctx, "jobs:mails", "a")
	admin.Set(ctx, "jobs:not-a-list", "x", 0)
	var ids []string
	for i := range entries {
		ids = append(ids, admin.XAdd(ctx, &goredis.XAddArgs{Stream: "events", Values: []string{"n", strconv.Itoa(i)}}).Val())
	}
	must(t, admin.XGroupCreate(ctx, "events", "workers", "0").Err())
	must(t, admin.XGroupCreate(ctx, "events", "late", "$").Err())
	got := admin.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "workers", Consumer: "w1", Streams: []string{"events", ">"}, Count: delivered}).Val()
	if len(got) != 1 || len(got[0].Messages) != delivered {
		t.Fatalf("XREADGROUP delivered %v", got)
	}
	must(t, admin.XAck(ctx, "events", "workers", ids[:acked]...).Err())
	// a group whose lag Redis cannot tell: an entry after its last
	// delivered ID was deleted
	var bids []string
	for i := range 5 {
		bids = append(bids, admin.XAdd(ctx, &goredis.XAddArgs{Stream: "broken", Values: []string{"n", strconv.Itoa(i)}}).Val())
	}
	must(t, admin.XGroupCreate(ctx, "broken", "g", "0").Err())
	must(t, admin.XDel(ctx, "broken", bids[4]).Err())

	// a stream trimmed after its group read 2 of 10 entries: Redis' lag
	// counts the 5 trimmed ones no consumer will get
	for i := range 10 {
		admin.XAdd(ctx, &goredis.XAddArgs{Stream: "trimmed", Values: []string{"n", strconv.Itoa(i)}})
	}
	must(t, admin.XGroupCreate(ctx, "trimmed", "g", "0").Err())
	must(t, admin.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{"trimmed", ">"}, Count: 2}).Err())
	must(t, admin.XTrimMaxLen(ctx, "trimmed", 3).Err())

	pwFile := filepath.Join(t.TempDir(), "password")
	must(t, os.WriteFile(pwFile, []byte(aclPassword+"\n"), 0o600))
	base := func(ttl string, metrics []map[string]any) map[string]any {
		return map[string]any{"address": srv.addr(), "username": aclUser, "password": map[string]string{"file": pwFile}, "cacheTTL": ttl, "metrics": metrics}
	}
	p := newReal(t, "redis", base("100ms", realMetrics))

	t.Run("values match redis-cli", func(t *testing.T) {
		want := func(metric string, w map[string]float64) {
			t.Helper()
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			v, err := query(qctx, p, metric)
			wantValues(t, v, err, w)
		}
		llen := srv.cliInt("LLEN", "e2e-jobs")
		if llen != jobs {
			t.Fatalf("redis-cli LLEN = %d, want %d", llen, jobs)
		}
		want("redis_jobs_length", map[string]float64{"key=e2e-jobs": float64(llen)})
		want("redis_tenant_jobs", map[string]float64{
			"key=jobs:orders,queue=orders": float64(srv.cliInt("LLEN", "jobs:orders")),
			"key=jobs:mails,queue=mails":   float64(srv.cliInt("LLEN", "jobs:mails")),
		})
		want("redis_events_length", map[string]float64{"stream=events": float64(srv.cliInt("XLEN", "events"))})

		groups := srv.cliGroups("events")
		num := func(g, f string) float64 {
			n, err := strconv.ParseFloat(groups[g][f], 64)
			if err != nil {
				t.Fatalf("redis-cli XINFO GROUPS events: %s %s = %q", g, f, groups[g][f])
			}
			return n
		}
		if num("workers", "pending") != delivered-acked || num("workers", "lag") != entries-delivered || num("late", "lag") != 0 {
			t.Fatalf("redis-cli XINFO GROUPS events = %v, not what was published", groups)
		}
		want("redis_events_pending", map[string]float64{
			"group=workers,stream=events": num("workers", "pending"), "group=late,stream=events": num("late", "pending"),
		})
		want("redis_events_lag", map[string]float64{
			"group=workers,stream=events": num("workers", "lag"), "group=late,stream=events": num("late", "lag"),
		})
		want("redis_events_backlog", map[string]float64{
			"group=workers,stream=events": num("workers", "lag") + num("workers", "pending"),
			"group=late,stream=events":    num("late", "lag") + num("late", "pending"),
		})

		// trimmed: the lag is capped at XLEN
		tg := srv.cliGroups("trimmed")["g"]
		if tg["lag"] != "8" || srv.cliInt("XLEN", "trimmed") != 3 || tg["pending"] != "2" {
			t.Fatalf("redis-cli: trimmed has XLEN %d and group g %v, want 3, lag 8, pending 2", srv.cliInt("XLEN", "trimmed"), tg)
		}
		want("redis_trimmed_backlog", map[string]float64{"group=g,stream=trimmed": 3 + 2})

		// redis-cli prints NULL as an empty line: the provider refuses
		if lag := srv.cliGroups("broken")["g"]["lag"]; lag != "" {
			t.Fatalf("redis-cli says group g of broken has lag %q, want NULL", lag)
		}
		_, err := query(ctx, p, "redis_broken_lag")
		wantReason(t, err, providers.ReasonBackend, `"redis"`, "lag as unknown (NULL)")
	})

	t.Run("refused command and wrong password", func(t *testing.T) {
		np := newReal(t, "redis-nolist", map[string]any{
			"address": srv.addr(), "username": "nolist", "password": map[string]string{"file": pwFile},
			"metrics": []map[string]any{realMetrics[0], realMetrics[2]},
		})
		_, err := query(ctx, np, "redis_jobs_length")
		wantReason(t, err, providers.ReasonBackend, `"redis-nolist"`, "NOPERM")
		v, err := query(ctx, np, "redis_events_length")
		wantValues(t, v, err, map[string]float64{"stream=events": entries})

		bad := filepath.Join(t.TempDir(), "bad")
		must(t, os.WriteFile(bad, []byte("wrong-Pa55"), 0o600))
		wp := newReal(t, "redis-wrongpw", map[string]any{
			"address": srv.addr(), "username": aclUser, "password": map[string]string{"file": bad},
			"metrics": []map[string]any{realMetrics[0]},
		})
		_, err = query(ctx, wp, "redis_jobs_length")
		wantReason(t, err, providers.ReasonBackend, `"redis-wrongpw"`, "WRONGPASS")
		if err != nil && strings.Contains(err.Error(), "wrong-Pa55") {
			t.Errorf("the error shows the password: %v", err)
		}
	})

	t.Run("1000 queries in one TTL cost one round trip", func(t *testing.T) {
		explicit := []map[string]any{realMetrics[0], realMetrics[2], realMetrics[3], realMetrics[4], realMetrics[5]}
		cp := newReal(t, "redis-count", base("1m", explicit))
		trips := &cp.client.(*redisClient).trips
		var wg sync.WaitGroup
		var mu sync.Mutex
		var warm []time.Duration
		errs := make(chan error, 1000)
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					start := time.Now()
					_, err := query(ctx, cp, "redis_jobs_length")
					d := time.Since(start)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					warm = append(warm, d)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if c, r := cp.BackendCalls(), trips.Load(); c != 1 || r != 1 {
			t.Errorf("1000 queries of one metric: %d backend reads and %d round trips, want 1 and 1", c, r)
		}
		// the four other metrics were read in that same pipeline
		for i := range 1000 {
			if _, err := query(ctx, cp, explicit[i%len(explicit)]["name"].(string)); err != nil {
				t.Fatal(err)
			}
		}
		if r := trips.Load(); r != 1 {
			t.Errorf("1000 queries over %d metrics: %d round trips, want 1", len(explicit), r)
		}
		// warm: served from the cache; cold: cacheTTL 0, every query reads
		sequentialWarm := make([]time.Duration, 0, 1000)
		for range 1000 {
			start := time.Now()
			if _, err := query(ctx, cp, "redis_events_backlog"); err != nil {
				t.Fatal(err)
			}
			sequentialWarm = append(sequentialWarm, time.Since(start))
		}
		zp := newReal(t, "redis-cold", base("0s", explicit))
		cold := make([]time.Duration, 0, 300)
		for range 300 {
			start := time.Now()
			if _, err := query(ctx, zp, "redis_events_backlog"); err != nil {
				t.Fatal(err)
			}
			cold = append(cold, time.Since(start))
		}
		if n := zp.client.(*redisClient).trips.Load(); n != 300 {
			t.Errorf("cacheTTL 0: %d round trips for 300 queries, want 300", n)
		}
		t.Logf("External query p99: warm %s (sequential; %s under 20 concurrent callers), cold %s (one pipelined round trip for %d metrics)",
			p99(sequentialWarm), p99(warm), p99(cold), len(explicit))
	})

	t.Run("server down, then back", func(t *testing.T) {
		if _, err := query(ctx, p, "redis_jobs_length"); err != nil {
			t.Fatal(err)
		}
		srv.stop()
		time.Sleep(150 * time.Millisecond) // past the 100ms TTL
		const timeout = 2 * time.Second
		qctx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		_, err := query(qctx, p, "redis_jobs_length")
		took := time.Since(start)
		cancel()
		wantReason(t, err, providers.ReasonBackend, `metrics provider "redis"`)
		if took > timeout+500*time.Millisecond {
			t.Errorf("the query failed after %s, want within the %s timeout", took, timeout)
		}
		if p.Health() == nil {
			t.Error("Health() is nil while the server is down")
		}
		t.Logf("server down: failed in %s: %v", took, err)

		srv.start()
		deadline := time.Now().Add(10 * time.Second)
		for {
			v, err := query(ctx, p, "redis_jobs_length")
			if err == nil {
				wantValues(t, v, nil, map[string]float64{"key=e2e-jobs": float64(srv.cliInt("LLEN", "e2e-jobs"))})
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no value 10s after the restart: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		v, err := query(ctx, p, "redis_events_backlog")
		wantValues(t, v, err, map[string]float64{"group=workers,stream=events": entries - acked, "group=late,stream=events": 0})
		if p.Health() != nil {
			t.Errorf("Health() after recovery: %v", p.Health())
		}
	})
}

// TestRealServerTLS reads over TLS with the server's CA, and refuses a
// server whose certificate it cannot verify.
func TestRealServerTLS(t *testing.T) {
	needBinaries(t)
	t.Parallel()
	dir := t.TempDir()
	ca, cert, key := writeCerts(t, dir)
	tlsPort := freeport.For(t)
	srv := startServer(t, "tls-port "+strconv.Itoa(tlsPort), "tls-cert-file "+cert, "tls-key-file "+key,
		"tls-ca-cert-file "+ca, "tls-auth-clients no")
	srv.cli("RPUSH", "e2e-jobs", "a", "b", "c", "d")
	pwFile := filepath.Join(dir, "password")
	must(t, os.WriteFile(pwFile, []byte(aclPassword), 0o600))
	metrics := []map[string]any{realMetrics[0]}
	addr := fmt.Sprintf("127.0.0.1:%d", tlsPort)

	// the least-privilege user, its password from a file, over TLS
	p := newReal(t, "redis-tls", map[string]any{
		"address": addr, "username": aclUser, "password": map[string]string{"file": pwFile}, "metrics": metrics,
		"tls": map[string]any{"caFile": ca},
	})
	v, err := query(context.Background(), p, "redis_jobs_length")
	wantValues(t, v, err, map[string]float64{"key=e2e-jobs": float64(srv.cliInt("LLEN", "e2e-jobs"))})

	// rediss:// verifies against the system roots, which do not hold the test CA
	up := newReal(t, "redis-tls-untrusted", map[string]any{
		"address": "rediss://" + addr, "username": aclUser, "password": map[string]string{"file": pwFile}, "metrics": metrics,
	})
	_, err = query(context.Background(), up, "redis_jobs_length")
	wantReason(t, err, providers.ReasonBackend, `"redis-tls-untrusted"`, "certificate")
}

// writeCerts writes a CA and a server certificate for 127.0.0.1.
func writeCerts(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redis test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	must(t, err)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	must(t, err)
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	must(t, err)
	write := func(name, typ string, der []byte) string {
		f := filepath.Join(dir, name)
		var b bytes.Buffer
		must(t, pem.Encode(&b, &pem.Block{Type: typ, Bytes: der}))
		must(t, os.WriteFile(f, b.Bytes(), 0o600))
		return f
	}
	return write("ca.crt", "CERTIFICATE", caDER), write("server.crt", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
