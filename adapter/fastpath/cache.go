package fastpath

import (
	"bytes"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/metrics/pkg/apis/external_metrics"
)

// maxCachedSelectors bounds the parsed selector cache: HPAs ask with a
// few selectors each, and a flood of distinct ones only empties it.
const maxCachedSelectors = 4096

// selectorCache keeps parsed label selectors by their text: labels.Parse
// (with its validation) was a tenth of the CPU of a cached selector query.
// A parsed selector is never modified (Add returns a new one), so one
// instance serves every request with that text.
type selectorCache struct {
	max int
	mu  sync.RWMutex
	m   map[string]labels.Selector
}

func newSelectorCache(max int) *selectorCache {
	return &selectorCache{max: max, m: make(map[string]labels.Selector)}
}

// parse is labels.Parse, cached; errors are not kept.
func (c *selectorCache) parse(s string) (labels.Selector, error) {
	c.mu.RLock()
	sel, ok := c.m[s]
	c.mu.RUnlock()
	if ok {
		return sel, nil
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[s] = sel
	c.mu.Unlock()
	return sel, nil
}

// minCachedItems: smaller answers are cheaper to encode than to look up
// and keep.
const minCachedItems = 256

// maxEncodedEntries bounds the entries of the encoded answer cache, and
// maxEncodedIdle how long an unused one is kept.
const (
	maxEncodedEntries = 64
	maxEncodedIdle    = 10 * time.Second
)

// encodedKey names one encoding of one provider answer. The answer is
// named by its items' backing array, weakly: a provider's result cache (the
// Prometheus provider's queryCacheTTL) hands out the same array for as long
// as it serves the same result, and a provider never changes a list it has
// returned (the chain encodes it after the call, concurrently with other
// callers; see providers.ExternalProvider). A weak pointer does not keep the
// array alive, and never equals one made for a later array at the same
// address.
type encodedKey struct {
	first          weak.Pointer[external_metrics.ExternalMetricValue]
	n              int
	serializer     runtime.Identifier
	acceptEncoding string
}

// encoded is a complete answer as SerializeObject wrote it.
type encoded struct {
	status int
	header http.Header
	body   []byte
	used   atomic.Int64 // unix nanoseconds
}

func (e *encoded) writeTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range e.header {
		h[k] = slices.Clip(v) // an Add appends elsewhere
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(e.body)
}

// encodedCache keeps the encoded bytes of large answers, so that the
// all-series answer served from a provider's result cache is a copy, not a
// JSON encoding and gzip of 10,000 items per request.
type encodedCache struct {
	maxBytes int
	mu       sync.Mutex
	m        map[encodedKey]*encoded
	bytes    int
}

func newEncodedCache(maxBytes int) *encodedCache {
	return &encodedCache{maxBytes: maxBytes, m: make(map[encodedKey]*encoded)}
}

func (c *encodedCache) enabled() bool { return c != nil && c.maxBytes > 0 }

func (c *encodedCache) get(k encodedKey) *encoded {
	c.mu.Lock()
	e := c.m[k]
	c.mu.Unlock()
	if e != nil {
		e.used.Store(time.Now().UnixNano())
	}
	return e
}

func (c *encodedCache) put(k encodedKey, e *encoded) {
	size := len(e.body)
	if size > c.maxBytes/4 {
		return
	}
	now := time.Now()
	e.used.Store(now.UnixNano())
	c.mu.Lock()
	defer c.mu.Unlock()
	// Drop what is idle or whose answer is gone, then the least recently
	// used until the new entry fits.
	for key, old := range c.m {
		if key.first.Value() == nil || now.Sub(time.Unix(0, old.used.Load())) > maxEncodedIdle {
			c.drop(key, old)
		}
	}
	for len(c.m) >= maxEncodedEntries || c.bytes+size > c.maxBytes {
		var lruKey encodedKey
		var lru *encoded
		for key, old := range c.m {
			if lru == nil || old.used.Load() < lru.used.Load() {
				lruKey, lru = key, old
			}
		}
		if lru == nil {
			break
		}
		c.drop(lruKey, lru)
	}
	if old, ok := c.m[k]; ok {
		c.drop(k, old)
	}
	c.m[k] = e
	c.bytes += size
}

func (c *encodedCache) drop(k encodedKey, e *encoded) {
	delete(c.m, k)
	c.bytes -= len(e.body)
}

// capture is a ResponseWriter that keeps what SerializeObject writes.
type capture struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newCapture() *capture { return &capture{header: make(http.Header)} }

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}

func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(p)
}

func (c *capture) entry() *encoded {
	status := c.status
	if status == 0 {
		status = http.StatusOK
	}
	return &encoded{status: status, header: c.header, body: c.body.Bytes()}
}
