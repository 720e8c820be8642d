package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Ports, all on 127.0.0.1.
const (
	EtcdPort           = 2379
	EtcdPeerPort       = 2380
	APIServerPort      = 6443
	KCMPort            = 10257
	KCMHPAPort         = 10258
	SchedulerPort      = 10259
	KwokPort           = 10250
	MetricsServerPort  = 4443
	AdapterPort        = 6444
	PushPort           = 6445
	AutoscalerPort     = 6446
	AutoscalerRecPort  = 6449
	PrometheusPort     = 9090
	ExporterPort       = 9105
	defaultPrometheus  = "/usr/bin/prometheus"
	kubectlTimeoutFlag = "--request-timeout=30s"
)

// Cluster is the local cluster of one state folder, as seen from one checkout.
type Cluster struct {
	Options
	RepoRoot      string // the metricscale checkout whose components it builds and runs
	CacheRoot     string // ~/.cache/metricscale
	KubeVersion   string // of hack/cluster/build/kubernetes/go.mod
	CacheDir      string // CacheRoot/KubeVersion
	Bin           string // CacheDir/bin: the built cluster binaries
	PrometheusBin string // Prometheus' binary
	// NodeIP is the host's address (HostIP) when the real node runs: up finds it, other
	// verbs read it from the state file.
	NodeIP string

	Out, Err io.Writer

	bold, red, green, yellow, reset string

	catalog         []*Component     // every component up may run, in order (components())
	procs           map[string]*proc // the processes this Cluster started and still reaps
	started         []string         // what `up` started, in order, to stop on failure
	retried         map[string]bool  // components `up` started a second time
	running         []string         // the backends `up` runs
	upStart         time.Time
	prometheusSince time.Time
	phase           time.Time
	phaseName       []string
}

// Paths of the state folder.
func (c *Cluster) pki(name string) string { return filepath.Join(c.Dir, "pki", name) }

// Kubeconfig is the admin kubeconfig of the cluster.
func (c *Cluster) Kubeconfig() string { return filepath.Join(c.Dir, "kubeconfig") }

// Kubectl is the cluster's kubectl binary.
func (c *Cluster) Kubectl() string { return filepath.Join(c.Bin, "kubectl") }

// DefaultCacheRoot is $METRICSCALE_CACHE, else $XDG_CACHE_HOME/metricscale, else
// ~/.cache/metricscale.
func DefaultCacheRoot(getenv func(string) string) (string, error) {
	if v := getenv("METRICSCALE_CACHE"); v != "" {
		return v, nil
	}
	if v := getenv("XDG_CACHE_HOME"); v != "" {
		return filepath.Join(v, "metricscale"), nil
	}
	if v := getenv("HOME"); v != "" {
		return filepath.Join(v, ".cache", "metricscale"), nil
	}
	return "", errors.New("neither HOME nor XDG_CACHE_HOME is set")
}

var kubeRequire = regexp.MustCompile(`(?m)^require\s+k8s\.io/kubernetes\s+(\S+)`)

// New returns the cluster of opts.Dir for the checkout repoRoot; out receives progress
// and err warnings and failures (the script's standard output and error).
func New(repoRoot, cacheRoot string, opts Options, out, errOut io.Writer) (*Cluster, error) {
	gomod, err := os.ReadFile(filepath.Join(repoRoot, "hack", "cluster", "build", "kubernetes", "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("kubernetes version: %w", err)
	}
	m := kubeRequire.FindSubmatch(gomod)
	if m == nil {
		return nil, errors.New("kubernetes version: no 'require k8s.io/kubernetes' line in hack/cluster/build/kubernetes/go.mod")
	}
	if opts.explicit == nil {
		opts.explicit = map[string]bool{}
	}
	c := &Cluster{
		Options: opts, RepoRoot: repoRoot, CacheRoot: cacheRoot, KubeVersion: string(m[1]),
		PrometheusBin: orDefault(os.Getenv("METRICSCALE_PROMETHEUS_BIN"), defaultPrometheus),
		Out:           out, Err: errOut, procs: map[string]*proc{}, retried: map[string]bool{}, catalog: components(),
	}
	c.CacheDir = filepath.Join(cacheRoot, c.KubeVersion)
	c.Bin = filepath.Join(c.CacheDir, "bin")
	if f, ok := out.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			c.bold, c.red, c.green, c.yellow, c.reset = "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[0m"
		}
	}
	return c, nil
}

// Open returns the cluster of the state folder dir (empty: $METRICSCALE_CLUSTER_DIR or
// the default) for the checkout repoRoot, with default options, writing to out and errOut.
func Open(repoRoot, dir string, out, errOut io.Writer) (*Cluster, error) {
	cacheRoot, err := DefaultCacheRoot(os.Getenv)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		dir = orDefault(os.Getenv("METRICSCALE_CLUSTER_DIR"), filepath.Join(cacheRoot, "cluster"))
	}
	return New(repoRoot, cacheRoot, DefaultOptions(dir), out, errOut)
}

// ---------------------------------------------------------------- output

func (c *Cluster) logf(format string, args ...any) { fmt.Fprintf(c.Out, format+"\n", args...) }

func (c *Cluster) warnf(format string, args ...any) {
	fmt.Fprintf(c.Err, "%swarning:%s %s\n", c.yellow, c.reset, fmt.Sprintf(format, args...))
}

// secs formats a duration as the script did: 12.3s.
func secs(d time.Duration) string {
	ms := d.Milliseconds()
	return fmt.Sprintf("%d.%01ds", ms/1000, (ms%1000)/100)
}

func (c *Cluster) phaseBegin(title string) {
	c.phase = time.Now()
	c.logf("%s==>%s %s", c.bold, c.reset, title)
}

func (c *Cluster) phaseEnd(name string) {
	d := time.Since(c.phase)
	c.phaseName = append(c.phaseName, fmt.Sprintf("%-42s %8s", name, secs(d)))
	c.logf("    done in %s (at %s)", secs(d), secs(time.Since(c.upStart)))
}

// ---------------------------------------------------------------- probes

type tlsMode int

const (
	plainHTTP tlsMode = iota
	insecureTLS
	adminTLS // the cluster's CA and the admin client certificate
)

// probe GETs url and fails unless the answer is 2xx; it returns the body.
func (c *Cluster) probe(ctx context.Context, url string, mode tlsMode) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	switch mode {
	case insecureTLS:
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback test cluster
	case adminTLS:
		ca, err := os.ReadFile(c.pki("ca.crt"))
		if err != nil {
			return "", err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		pair, err := tls.LoadX509KeyPair(c.pki("admin.crt"), c.pki("admin.key"))
		if err != nil {
			return "", err
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("%s: HTTP %d: %s", url, resp.StatusCode, lastLines(string(bytes.TrimSpace(body)), 5))
	}
	return string(body), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// busyPorts returns the ports that cannot be bound on 127.0.0.1.
func busyPorts(ports []int) []int {
	var busy []int
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			busy = append(busy, p)
			continue
		}
		_ = l.Close()
	}
	return busy
}

// ---------------------------------------------------------------- commands

// run runs a program (kubectl, clusterutil, go) and returns its combined output.
func run(ctx context.Context, dir string, env []string, stdin io.Reader, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdin = stdin
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group: a Ctrl-C meant for `up` reaches `up`, which stops what it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w", filepath.Base(name), strings.Join(args, " "), err)
	}
	return out.String(), nil
}

// kubectl runs the cluster's kubectl with the admin kubeconfig; none of these calls may hang.
func (c *Cluster) kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	base := []string{"--kubeconfig", c.Kubeconfig(), "--cache-dir", filepath.Join(c.Dir, "kubectl-cache"), kubectlTimeoutFlag}
	var in io.Reader
	if stdin != "" {
		in = strings.NewReader(stdin)
	}
	return run(ctx, "", nil, in, c.Kubectl(), append(base, args...)...)
}

// apply applies manifests given as text.
func (c *Cluster) apply(ctx context.Context, manifests string) error {
	out, err := c.kubectl(ctx, manifests, "apply", "-f", "-")
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(out))
	}
	return nil
}

// clusterutil runs the cached clusterutil (PKI, kubeconfigs, tokens).
func (c *Cluster) clusterutil(ctx context.Context, args ...string) (string, error) {
	out, err := run(ctx, "", nil, nil, filepath.Join(c.Bin, "clusterutil"), args...)
	if err != nil {
		return out, fmt.Errorf("%w: %s", err, strings.TrimSpace(out))
	}
	return out, nil
}

// FindRepoRoot is the folder at or above the working directory that holds
// hack/cluster.sh: the checkout the command, the demo and the e2e suite run from.
func FindRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "hack", "cluster.sh")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no hack/cluster.sh at or above %s: run from the metricscale checkout, or set METRICSCALE_REPO_ROOT", dir)
		}
	}
}
