package prometheus

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	pmodel "github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/providers/ondemand"
	"github.com/metricscale/metricscale/providers/options"
)

// maxCachedQueries bounds the result cache: queries embed object names.
const maxCachedQueries = 10000

// client runs PromQL queries: identical concurrent queries share one call
// and, with a TTL, results are reused.
type client struct {
	api      v1.API
	clock    clock.PassiveClock
	timeout  time.Duration // per query, 0: the caller's
	cacheTTL time.Duration

	calls atomic.Int64 // PromQL calls made, for tests and benchmarks

	mu       sync.Mutex
	inflight map[string]*call
	cache    map[string]cachedResult
}

type call struct {
	done chan struct{}
	res  *result
	err  error
}

type cachedResult struct {
	res *result
	at  time.Time
}

// result is one answer of Prometheus, shared by every caller of its flight
// (and, with the cache on, by every caller until it expires), with what
// callers derive from it: derived once per result, never per API query.
type result struct {
	val pmodel.Value

	mu   sync.Mutex
	memo map[string]*memoEntry
}

type memoEntry struct {
	once sync.Once
	v    any
	err  error
}

// derived returns build's value for key, calling build once per result.
// The value is shared: callers must not modify it.
func (r *result) derived(key string, build func(pmodel.Value) (any, error)) (any, error) {
	r.mu.Lock()
	if r.memo == nil {
		r.memo = map[string]*memoEntry{}
	}
	e := r.memo[key]
	if e == nil {
		e = &memoEntry{}
		r.memo[key] = e
	}
	r.mu.Unlock()
	e.once.Do(func() { e.v, e.err = build(r.val) })
	return e.v, e.err
}

func newClient(s *settings, clk clock.PassiveClock) (*client, error) {
	rt, err := newRoundTripper(s)
	if err != nil {
		return nil, err
	}
	c, err := api.NewClient(api.Config{Address: s.URL, RoundTripper: rt})
	if err != nil {
		return nil, err
	}
	if s.verb == http.MethodGet {
		c = getClient{Client: c, maxGET: DefaultMaxGETQueryBytes}
	}
	return &client{
		api: v1.NewAPI(c), clock: clk, timeout: s.queryTimeout, cacheTTL: s.cacheTTL,
		inflight: map[string]*call{}, cache: map[string]cachedResult{},
	}, nil
}

// query runs an instant query at Prometheus' current time.
func (c *client) query(ctx context.Context, q string) (pmodel.Value, error) {
	r, err := c.queryResult(ctx, q)
	if err != nil {
		return nil, err
	}
	return r.val, nil
}

// queryResult is query with the shared result. With the cache off, a
// result lives as long as its flight: a caller arriving after it is done
// starts a new one.
func (c *client) queryResult(ctx context.Context, q string) (*result, error) {
	if c.cacheTTL > 0 {
		ttl := c.cacheTTL
		// The change feed's poll takes a cached answer only if recent.
		if d, ok := ondemand.MaxAge(ctx); ok && d < ttl {
			ttl = d
		}
		c.mu.Lock()
		r, ok := c.cache[q]
		c.mu.Unlock()
		if ok && c.clock.Since(r.at) < ttl {
			return r.res, nil
		}
	}
	c.mu.Lock()
	cl, shared := c.inflight[q]
	if !shared {
		cl = &call{done: make(chan struct{})}
		c.inflight[q] = cl
		// The shared call must not die with its first caller: it runs on
		// its own deadline, and every caller waits only as long as its own.
		fctx, cancel := c.fetchContext(ctx)
		go func() {
			defer cancel()
			var val pmodel.Value
			val, cl.err = c.do(fctx, q)
			if cl.err == nil {
				cl.res = &result{val: val}
			}
			c.mu.Lock()
			delete(c.inflight, q)
			if cl.err == nil && c.cacheTTL > 0 {
				c.store(q, cl.res)
			}
			c.mu.Unlock()
			close(cl.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-cl.done:
		return cl.res, cl.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *client) fetchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	fctx := context.WithoutCancel(ctx)
	timeout := c.timeout
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); timeout == 0 || left < timeout {
			timeout = left
		}
	}
	if timeout <= 0 {
		timeout = defaultQueryTimeout
		if _, ok := ctx.Deadline(); ok {
			timeout = time.Millisecond // the caller is already late
		}
	}
	return context.WithTimeout(fctx, timeout)
}

// store caches a result; called with c.mu held.
func (c *client) store(q string, res *result) {
	now := c.clock.Now()
	if len(c.cache) >= maxCachedQueries {
		for k, r := range c.cache {
			if now.Sub(r.at) >= c.cacheTTL {
				delete(c.cache, k)
			}
		}
		if len(c.cache) >= maxCachedQueries {
			clear(c.cache)
		}
	}
	c.cache[q] = cachedResult{res: res, at: now}
}

func (c *client) do(ctx context.Context, q string) (pmodel.Value, error) {
	c.calls.Add(1)
	var opts []v1.Option
	if dl, ok := ctx.Deadline(); ok {
		// Prometheus stops evaluating when we stop waiting. Whole seconds:
		// client_golang writes time.Duration.String(), and Prometheus
		// refuses fractions ("9.99s").
		if left := time.Until(dl).Truncate(time.Second); left > 0 {
			opts = append(opts, v1.WithTimeout(left))
		} else {
			opts = append(opts, v1.WithTimeout(time.Second))
		}
	}
	start := time.Now()
	val, warnings, err := c.api.Query(ctx, q, time.Time{}, opts...)
	if len(warnings) > 0 {
		klog.V(2).InfoS("Prometheus warned about a query", "query", shorten(q), "warnings", warnings)
	}
	if err != nil {
		return nil, err
	}
	klog.V(6).InfoS("Queried Prometheus", "query", shorten(q), "duration", time.Since(start))
	return val, nil
}

// series lists the series matching selector seen since start.
func (c *client) series(ctx context.Context, selector string, start time.Time) ([]pmodel.LabelSet, error) {
	sets, warnings, err := c.api.Series(ctx, []string{selector}, start, time.Time{})
	if len(warnings) > 0 {
		klog.V(2).InfoS("Prometheus warned about a series query", "selector", selector, "warnings", warnings)
	}
	return sets, err
}

// shorten keeps messages readable when queries carry thousands of names.
func shorten(q string) string {
	const limit = 300
	if len(q) <= limit {
		return q
	}
	return fmt.Sprintf("%s…(%d bytes)", q[:limit], len(q))
}

// getClient turns the v1 API's form POSTs into GETs, as prometheus-adapter's
// --prometheus-verb=GET does, unless the query is too long for a URL.
type getClient struct {
	api.Client
	maxGET int
}

func (c getClient) Do(ctx context.Context, req *http.Request) (*http.Response, []byte, error) {
	if req.Method == http.MethodPost && req.GetBody != nil &&
		req.Header.Get("Content-Type") == "application/x-www-form-urlencoded" && req.ContentLength <= int64(c.maxGET) {
		body, err := req.GetBody()
		if err != nil {
			return nil, nil, err
		}
		form, err := io.ReadAll(body)
		if err != nil {
			return nil, nil, err
		}
		u := *req.URL
		u.RawQuery = string(form)
		get, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range req.Header {
			if k != "Content-Type" {
				get.Header[k] = v
			}
		}
		req = get
	}
	return c.Client.Do(ctx, req)
}

// newRoundTripper builds the transport: a kubeconfig's, or TLS from the
// options; then bearer token, basic auth and extra headers.
func newRoundTripper(s *settings) (http.RoundTripper, error) {
	var rt http.RoundTripper
	switch {
	case s.AuthConfig != "" || s.AuthInCluster:
		var cfg *rest.Config
		var err error
		if s.AuthInCluster {
			cfg, err = rest.InClusterConfig()
		} else {
			rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: s.AuthConfig}
			cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		}
		if err != nil {
			return nil, fmt.Errorf("authConfig: %w", err)
		}
		if rt, err = rest.TransportFor(cfg); err != nil {
			return nil, fmt.Errorf("authConfig: %w", err)
		}
	default:
		t := &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			MaxIdleConnsPerHost:   100, // queries to one host, many in parallel
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
		tc := &tls.Config{InsecureSkipVerify: s.InsecureSkipTLSVerify} //nolint:gosec // asked for explicitly
		if s.CAFile != "" {
			pool, err := options.CertPool(s.CAFile)
			if err != nil {
				return nil, fmt.Errorf("caFile: %w", err)
			}
			tc.RootCAs = pool
		}
		if s.CertFile != "" {
			cert, err := options.KeyPair(s.CertFile, s.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("certFile: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		t.TLSClientConfig = tc
		rt = t
	}
	h := &authRoundTripper{next: rt, headers: http.Header{}, secretHeaders: map[string]*headerSecret{}}
	for k, v := range s.Headers {
		if v.Secret == nil {
			h.headers.Set(k, v.Value)
			continue
		}
		hs := &headerSecret{field: "headers." + k, src: v.Secret}
		if _, err := hs.get(); err != nil {
			return nil, err
		}
		h.secretHeaders[http.CanonicalHeaderKey(k)] = hs
	}
	if s.BearerTokenFile != "" {
		h.token = &fileSecret{path: s.BearerTokenFile}
		if _, err := h.token.get(); err != nil {
			return nil, fmt.Errorf("bearerTokenFile: %w", err)
		}
	}
	if s.PasswordFile != "" || s.Username != "" {
		h.username = s.Username
		if s.PasswordFile != "" {
			h.password = &fileSecret{path: s.PasswordFile}
			if _, err := h.password.get(); err != nil {
				return nil, fmt.Errorf("passwordFile: %w", err)
			}
		}
	}
	return h, nil
}

// authRoundTripper adds headers and credentials to every request.
type authRoundTripper struct {
	next          http.RoundTripper
	headers       http.Header
	secretHeaders map[string]*headerSecret // by canonical name
	token         *fileSecret
	username      string
	password      *fileSecret
}

func (a *authRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range a.headers {
		req.Header[k] = v
	}
	for k, hs := range a.secretHeaders {
		v, err := hs.get()
		if err != nil {
			return nil, err
		}
		req.Header.Set(k, string(v))
	}
	switch {
	case a.token != nil:
		tok, err := a.token.get()
		if err != nil {
			return nil, fmt.Errorf("reading the bearer token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	case a.username != "":
		pw := ""
		if a.password != nil {
			p, err := a.password.get()
			if err != nil {
				return nil, fmt.Errorf("reading the basic auth password: %w", err)
			}
			pw = p
		}
		req.SetBasicAuth(a.username, pw)
	}
	return a.next.RoundTrip(req)
}

// fileSecret is a credential file reread at most every minute, so a rotated
// token (a projected service account token) is used without a restart.
type fileSecret struct {
	path string
	mu   sync.Mutex
	val  string
	at   time.Time
}

func (f *fileSecret) get() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.val != "" && time.Since(f.at) < time.Minute {
		return f.val, nil
	}
	b, err := options.ReadFile(context.Background(), f.path)
	if err != nil {
		if f.val != "" {
			klog.ErrorS(err, "Keeping the last credential read", "file", f.path)
			return f.val, nil
		}
		return "", err
	}
	v := strings.TrimSpace(string(bytes.TrimSpace(b)))
	if v == "" {
		return "", errors.New(f.path + " is empty")
	}
	f.val, f.at = v, time.Now()
	return v, nil
}

// headerSecret is a header's value from a file (reread at most every
// minute, like fileSecret) or an environment variable (read once).
type headerSecret struct {
	field string
	src   *options.Secret
	mu    sync.Mutex
	val   options.Sensitive
	at    time.Time
}

func (h *headerSecret) get() (options.Sensitive, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.val != "" && (h.src.File == "" || time.Since(h.at) < time.Minute) {
		return h.val, nil
	}
	v, err := h.src.Value(h.field)
	switch {
	case err != nil && h.val != "":
		klog.ErrorS(err, "Keeping the last header value read", "header", h.field)
		return h.val, nil
	case err != nil:
		return "", err
	case strings.TrimSpace(v) == "":
		return "", fmt.Errorf("%s: %s is empty", h.field, h.src)
	case strings.ContainsAny(v, "\r\n"):
		return "", fmt.Errorf("%s: %s holds a line break", h.field, h.src)
	}
	h.val, h.at = options.Sensitive(strings.TrimSpace(v)), time.Now()
	return h.val, nil
}
