// Package fastpath serves the adapter's hottest read, an external metric
// list (GET /apis/external.metrics.k8s.io/v1beta1/namespaces/NS/METRIC,
// optionally ?labelSelector=...), in front of the generic API server's
// handler chain, with the chain's own authenticator, authorizer, request
// info resolver, serializers and error writers.
//
// Why: the generic chain costs more than the query itself for a cached
// answer (a goroutine and a timer per request for the timeout filter, the
// request info parsed twice, audit and flow-control plumbing, go-restful
// routing, parameter decoding through the scheme): about half the adapter's
// CPU per query in `go test -bench ExternalQuery ./adapter/bench/`.
//
// What it does not fully understand goes to the chain unchanged: any method
// but GET, any path but that one (after the resolver agrees on it), any
// query parameter but one labelSelector, a selector that does not parse
// (the chain's 400), impersonation headers, Accept types other than JSON and
// protobuf or with parameters (tables, partial metadata), verbose request
// logging (klog -v 3 and up, which the chain's HTTP logger serves), a full
// in-flight bound, and a server shutting down. The App wires it only when
// the generic config has nothing the fast path would skip (audit, tracing,
// flow control, CORS, HSTS, API audiences, GOAWAY chance, Retry-After at
// shutdown): see Eligible.
//
// Answers are the chain's: the same 401 and 403 bodies (the chain's writers
// are called), the same provider errors (ErrorNegotiated), the same encoding
// (SerializeObject with the negotiated serializer, gzip over 128 KiB), the
// same Audit-Id and Cache-Control headers, and the same
// apiserver_request_* and metric freshness metrics.
package fastpath

import (
	"context"
	"net/http"
	"net/url"
	"path"
	"reflect"
	"strings"
	"time"
	"weak"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilwaitgroup "k8s.io/apimachinery/pkg/util/waitgroup"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	endpointsmetrics "k8s.io/apiserver/pkg/endpoints/metrics"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/tracing"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/external_metrics"
	externalv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	cmmetrics "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver/metrics"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// ExternalSource answers external metric queries: the provider registry.
type ExternalSource interface {
	GetExternalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info provider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error)
}

// Config is what the fast path shares with the generic chain.
type Config struct {
	// Authenticator and Authorizer are the generic config's instances (the
	// delegated ones with their caches, the adapter's anonymous
	// restriction included).
	Authenticator authenticator.Request
	Authorizer    authorizer.Authorizer
	// RequestInfoResolver is the generic config's: the authorization
	// attributes are built from its RequestInfo, as the chain builds them.
	RequestInfoResolver apirequest.RequestInfoResolver
	// Serializer is the generic config's, for the 401 and 403 answers.
	Serializer runtime.NegotiatedSerializer
	// APISerializer is the metrics API groups' (custom-metrics-apiserver's
	// Codecs), for answers and provider errors.
	APISerializer runtime.NegotiatedSerializer
	External      ExternalSource
	// MaxInflight bounds the requests the fast path serves at once; beyond
	// it, requests go to the chain, which applies its own bound (so at most
	// twice --max-requests-inflight read requests run in all).
	MaxInflight int
	// RequestTimeout is the deadline of a request's context (the chain's
	// --request-timeout); providers also have their own timeouts.
	RequestTimeout time.Duration
	// WaitGroup is the chain's non-long-running request group: shutdown
	// waits for fast-path requests too; once it refuses, the chain answers.
	WaitGroup *utilwaitgroup.SafeWaitGroup
	// EncodedCacheBytes bounds the cache of encoded large answers (0: off).
	EncodedCacheBytes int
}

const externalPrefix = "/apis/" + external_metrics.GroupName + "/v1beta1/namespaces/"

var externalGV = externalv1beta1.SchemeGroupVersion

// Handler is the fast path; anything it does not serve goes to Next.
type Handler struct {
	next      http.Handler
	c         Config
	unauth    http.Handler
	inflight  chan struct{}
	selectors *selectorCache
	encoded   *encodedCache
	freshness cmmetrics.FreshnessObserver
	served    metrics.CounterMetric
	chained   metrics.CounterMetric
}

// New returns the fast path in front of next.
func New(next http.Handler, c Config) *Handler {
	n := c.MaxInflight
	if n <= 0 {
		n = 400 // the generic server's default --max-requests-inflight
	}
	registerMetrics()
	return &Handler{
		served:  requests.WithLabelValues("fast"),
		chained: requests.WithLabelValues("chain"),
		next:    next, c: c,
		unauth:    genericapifilters.Unauthorized(c.Serializer),
		inflight:  make(chan struct{}, n),
		selectors: newSelectorCache(maxCachedSelectors),
		encoded:   newEncodedCache(c.EncodedCacheBytes),
		freshness: cmmetrics.NewFreshnessObserver(external_metrics.GroupName),
	}
}

// Eligible says why the generic config needs its full chain for every
// request ("" if it does not): features of the chain the fast path would
// skip.
func Eligible(c *genericapiserver.Config) string {
	switch {
	case c.Authentication.Authenticator == nil || c.Authorization.Authorizer == nil:
		return "no authenticator or authorizer"
	case c.RequestInfoResolver == nil:
		return "no request info resolver"
	case c.AuditBackend != nil && c.AuditPolicyRuleEvaluator != nil:
		return "audit is configured"
	case c.FlowControl != nil:
		return "API priority and fairness is on"
	case len(c.CorsAllowedOriginList) > 0:
		return "CORS is configured"
	case len(c.HSTSDirectives) > 0:
		return "HSTS is configured"
	case len(c.Authentication.APIAudiences) > 0:
		return "API audiences are configured"
	case c.GoawayChance > 0:
		return "a GOAWAY chance is configured"
	case c.ShutdownSendRetryAfter:
		return "--shutdown-send-retry-after is set"
	case c.TracerProvider != nil && reflect.TypeOf(c.TracerProvider) != reflect.TypeOf(tracing.NewNoopTracerProvider()):
		return "tracing is configured"
	}
	return ""
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet || req.URL == nil || !strings.HasPrefix(req.URL.Path, externalPrefix) {
		h.next.ServeHTTP(w, req)
		return
	}
	q, ok := h.parse(req)
	if !ok {
		h.toChain(w, req)
		return
	}
	select {
	case h.inflight <- struct{}{}:
	default:
		h.toChain(w, req)
		return
	}
	defer func() { <-h.inflight }()
	if h.c.WaitGroup != nil {
		if err := h.c.WaitGroup.Add(1); err != nil {
			h.toChain(w, req) // shutting down: the chain says so
			return
		}
		defer h.c.WaitGroup.Done()
	}
	h.served.Inc()
	h.serve(w, req, q)
}

func (h *Handler) toChain(w http.ResponseWriter, req *http.Request) {
	h.chained.Inc()
	h.next.ServeHTTP(w, req)
}

// query is a request the fast path understood.
type query struct {
	info      *apirequest.RequestInfo
	namespace string
	metric    string
	selector  labels.Selector
	media     negotiation.MediaTypeOptions
	encoding  runtime.SerializerInfo
}

// parse decides whether the fast path serves req.
func (h *Handler) parse(req *http.Request) (query, bool) {
	var q query
	if req.URL.RawPath != "" {
		return q, false
	}
	p := req.URL.Path
	rest := p[len(externalPrefix):]
	ns, metric, found := strings.Cut(rest, "/")
	if !found || ns == "" || metric == "" || strings.Contains(metric, "/") || path.Clean(p) != p {
		return q, false
	}
	for k := range req.Header {
		if strings.HasPrefix(k, "Impersonate-") {
			return q, false
		}
	}
	if klog.V(3).Enabled() {
		return q, false // the chain's HTTP logger logs every request at -v 3
	}
	raw, ok := selectorParam(req.URL.RawQuery)
	if !ok {
		return q, false
	}
	sel, err := h.selectors.parse(raw)
	if err != nil {
		return q, false // the chain answers 400 naming it
	}
	media, enc, err := negotiation.NegotiateOutputMediaType(req, h.c.APISerializer, negotiation.DefaultEndpointRestrictions)
	if err != nil || media.Convert != nil || media.Stream != "" || media.Export || media.UseServerVersion != "" || media.Profile != "" || len(media.Unrecognized) > 0 {
		return q, false
	}
	if enc.MediaType != runtime.ContentTypeJSON && enc.MediaType != runtime.ContentTypeProtobuf {
		return q, false
	}
	info, err := h.c.RequestInfoResolver.NewRequestInfo(req)
	if err != nil || !info.IsResourceRequest || info.Verb != "list" || info.APIGroup != external_metrics.GroupName ||
		info.APIVersion != externalGV.Version || info.Namespace != ns || info.Resource != metric || info.Name != "" || info.Subresource != "" {
		return q, false
	}
	return query{info: info, namespace: ns, metric: metric, selector: sel, media: media, encoding: enc}, true
}

// selectorParam returns the labelSelector of a query string holding it
// alone (or nothing); ok is false for anything else.
func selectorParam(rawQuery string) (string, bool) {
	if rawQuery == "" {
		return "", true
	}
	v, ok := strings.CutPrefix(rawQuery, "labelSelector=")
	if !ok || strings.ContainsAny(v, "&;") {
		return "", false
	}
	s, err := url.QueryUnescape(v)
	if err != nil {
		return "", false
	}
	return s, true
}

// serve authenticates, authorizes and answers q, as the chain does.
func (h *Handler) serve(w http.ResponseWriter, req *http.Request, q query) {
	start := time.Now()
	auditID := req.Header.Get(auditinternal.HeaderAuditID)
	if auditID == "" {
		auditID = uuid.New().String()
	}
	hdr := w.Header()
	hdr.Set(auditinternal.HeaderAuditID, auditID)
	hdr.Set("Cache-Control", "no-cache, private")

	ctx, cancel := context.WithTimeout(req.Context(), h.requestTimeout())
	defer cancel()
	ctx = apirequest.WithRequestInfo(ctx, q.info)
	req = req.WithContext(ctx)
	defer utilruntime.HandleCrash(func(p any) { crashed(w, req, p) })

	resp, ok, err := h.c.Authenticator.AuthenticateRequest(req)
	if err != nil || !ok {
		if err != nil {
			klog.ErrorS(err, "Unable to authenticate the request")
		}
		h.unauth.ServeHTTP(w, req)
		return
	}
	if isAnonymous(resp.User) {
		// The adapter's authenticator refuses anonymous requests outside
		// the health paths; should one get here, the chain decides.
		h.next.ServeHTTP(w, req)
		return
	}
	ctx = apirequest.WithUser(ctx, resp.User)
	req = req.WithContext(ctx)
	attrs, err := genericapifilters.GetAuthorizerAttributes(ctx)
	if err != nil {
		responsewriters.InternalError(w, req, err)
		return
	}
	decision, reason, err := h.c.Authorizer.Authorize(ctx, attrs)
	if decision != authorizer.DecisionAllow {
		if err != nil {
			responsewriters.InternalError(w, req, err)
			return
		}
		klog.V(4).InfoS("Forbidden", "URI", req.RequestURI, "reason", reason)
		responsewriters.Forbidden(attrs, w, req, reason, h.c.Serializer)
		return
	}

	rec := &statusRecorder{ResponseWriter: w}
	h.answer(rec, req, q)
	endpointsmetrics.MonitorRequest(req, "LIST", external_metrics.GroupName, externalGV.Version, "*", "*", "cluster", "external-metrics",
		false, "", rec.status(), rec.size, time.Since(start))
}

// answer queries the provider and writes its answer or error.
func (h *Handler) answer(w http.ResponseWriter, req *http.Request, q query) {
	ctx := apirequest.WithNamespace(req.Context(), q.namespace)
	list, err := h.c.External.GetExternalMetric(ctx, q.namespace, q.selector, provider.ExternalMetricInfo{Metric: q.metric})
	if err != nil {
		responsewriters.ErrorNegotiated(err, h.c.APISerializer, externalGV, w, req)
		return
	}
	for i := range list.Items {
		h.freshness.Observe(list.Items[i].Timestamp)
	}
	if list.Items == nil {
		// as the chain's transformResponseObject: "items": [], not null
		list = &external_metrics.ExternalMetricValueList{ListMeta: list.ListMeta, Items: []external_metrics.ExternalMetricValue{}}
	}
	encoder := h.c.APISerializer.EncoderForVersion(q.encoding.Serializer, externalGV)
	if h.encoded.enabled() && len(list.Items) >= minCachedItems && list.ListMeta == (metav1.ListMeta{}) {
		key := encodedKey{
			first: weak.Make(&list.Items[0]), n: len(list.Items),
			serializer: q.encoding.Serializer.Identifier(), acceptEncoding: req.Header.Get("Accept-Encoding"),
		}
		if e := h.encoded.get(key); e != nil {
			e.writeTo(w)
			return
		}
		rec := newCapture()
		responsewriters.SerializeObject(q.encoding.MediaType, encoder, rec, req, http.StatusOK, list)
		e := rec.entry()
		if e.status == http.StatusOK {
			h.encoded.put(key, e)
		}
		e.writeTo(w)
		return
	}
	responsewriters.SerializeObject(q.encoding.MediaType, encoder, w, req, http.StatusOK, list)
}

func (h *Handler) requestTimeout() time.Duration {
	if h.c.RequestTimeout > 0 {
		return h.c.RequestTimeout
	}
	return 60 * time.Second
}

func isAnonymous(u user.Info) bool {
	if u == nil || u.GetName() == user.Anonymous {
		return true
	}
	for _, g := range u.GetGroups() {
		if g == user.AllUnauthenticated {
			return true
		}
	}
	return false
}

// crashed answers a panic as the chain's panic recovery does; HandleCrash
// logs it (and re-panics, which net/http recovers per request).
func crashed(w http.ResponseWriter, req *http.Request, p any) {
	if p == http.ErrAbortHandler {
		return
	}
	http.Error(w, "This request caused apiserver to panic. Look in the logs for details.", http.StatusInternalServerError)
	klog.ErrorS(nil, "apiserver panic'd", "method", req.Method, "URI", req.RequestURI)
}

// statusRecorder keeps the status and size written, for MonitorRequest.
type statusRecorder struct {
	http.ResponseWriter
	code int
	size int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.size += n
	return n, err
}

func (r *statusRecorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
