// Package fastpath serves the adapter's hottest reads in front of the
// generic API server's handler chain, with the chain's own authenticator,
// authorizer, request info resolver, serializers and error writers:
//
//	GET /apis/external.metrics.k8s.io/v1beta1/namespaces/NS/METRIC[?labelSelector=S]
//	GET /apis/custom.metrics.k8s.io/VERSION/namespaces/NS/RESOURCE/*/METRIC[?labelSelector=S][&metricLabelSelector=M]
//
// Why: the generic chain cost more than a cached query itself (a goroutine
// and a timer per request for the timeout filter, the request info parsed
// twice, audit and flow-control plumbing, go-restful routing, parameter
// decoding through the scheme): about half the adapter's CPU per query in
// `go test -bench ExternalQuery ./adapter/bench/`.
//
// What it does not fully understand goes to the chain unchanged: any method
// but GET, any other path (or one the resolver reads differently), any
// other query parameter or a repeated one, a selector that does not parse
// (the chain's 400 names it), impersonation headers, Accept types other
// than JSON and protobuf or with parameters (tables, partial metadata),
// verbose request logging (klog -v 3 and up, which the chain's HTTP logger
// serves), a full in-flight bound, and a server shutting down. The adapter
// wires it only when the generic config has nothing the fast path would
// skip (audit, tracing, flow control, CORS, HSTS, API audiences, GOAWAY
// chance, Retry-After at shutdown): see Eligible.
//
// Answers are the chain's: the same 401 and 403 bodies (the chain's writers
// are called), the same provider errors (ErrorNegotiated), the same encoding
// (SerializeObject with the negotiated serializer, gzip from 128 KiB), the
// same Audit-Id and Cache-Control headers, and the same apiserver_request_*
// and metric freshness metrics. Never anonymous: an anonymous user goes to
// the chain, which refuses it outside the health paths.
package fastpath

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"path"
	"reflect"
	"slices"
	"strings"
	"time"
	"weak"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	"k8s.io/metrics/pkg/apis/custom_metrics"
	custommetricsv1beta1 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta1"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
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
	// Custom, if set, also serves custom metrics of objects selected by
	// labels (RESOURCE/*/METRIC).
	Custom CustomSource
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

// CustomSource answers custom metric queries for objects selected by labels:
// the provider registry.
type CustomSource interface {
	GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info provider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error)
}

const (
	externalPrefix = "/apis/" + external_metrics.GroupName + "/v1beta1/namespaces/"
	customPrefix   = "/apis/" + custom_metrics.GroupName + "/"
)

var (
	externalGV     = externalv1beta1.SchemeGroupVersion
	customVersions = map[string]schema.GroupVersion{"v1beta1": custommetricsv1beta1.SchemeGroupVersion, "v1beta2": custommetricsv1beta2.SchemeGroupVersion}
	errNotFastPath = errors.New("not for the fast path")
	externalParams = []string{"labelSelector"}
	customParams   = []string{"labelSelector", "metricLabelSelector"}
)

// Handler is the fast path; anything it does not serve goes to Next.
type Handler struct {
	next      http.Handler
	c         Config
	unauth    http.Handler
	inflight  chan struct{}
	selectors *selectorCache
	encoded   *encodedCache
	freshness map[string]cmmetrics.FreshnessObserver // by API group
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
		next: next, c: c,
		unauth:    genericapifilters.Unauthorized(c.Serializer),
		inflight:  make(chan struct{}, n),
		selectors: newSelectorCache(maxCachedSelectors),
		encoded:   newEncodedCache(c.EncodedCacheBytes),
		freshness: map[string]cmmetrics.FreshnessObserver{
			external_metrics.GroupName: cmmetrics.NewFreshnessObserver(external_metrics.GroupName),
			custom_metrics.GroupName:   cmmetrics.NewFreshnessObserver(custom_metrics.GroupName),
		},
		served:  requests.WithLabelValues("fast"),
		chained: requests.WithLabelValues("chain"),
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
	if req.URL == nil || !strings.HasPrefix(req.URL.Path, externalPrefix) && !(h.c.Custom != nil && strings.HasPrefix(req.URL.Path, customPrefix)) {
		h.next.ServeHTTP(w, req)
		return
	}
	q, err := h.parse(req)
	if err != nil {
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
	gv        schema.GroupVersion
	namespace string
	metric    string
	resource  string // custom metrics: the described objects' resource
	selector  labels.Selector
	metricSel labels.Selector // custom metrics: metricLabelSelector
	encoding  runtime.SerializerInfo
	pretty    bool // the negotiation chose the pretty serializer (curl, browsers, ?pretty, Accept's pretty=true)
}

// parse decides whether the fast path serves req: GET
//
//	/apis/external.metrics.k8s.io/v1beta1/namespaces/NS/METRIC[?labelSelector=S]
//	/apis/custom.metrics.k8s.io/VERSION/namespaces/NS/RESOURCE/*/METRIC[?labelSelector=S][&metricLabelSelector=M]
//
// as the chain's resolver and router see them, with the chain's media type
// negotiation choosing JSON or protobuf.
func (h *Handler) parse(req *http.Request) (query, error) {
	var q query
	p := req.URL.Path
	// Clients escape the "*" of RESOURCE/*/METRIC (client-go sends %2A):
	// any escaping is fine but an escaped "/", which would split the path
	// differently from the chain's router.
	if req.Method != http.MethodGet || path.Clean(p) != p || strings.Contains(req.URL.RawPath, "%2F") || strings.Contains(req.URL.RawPath, "%2f") {
		return q, errNotFastPath
	}
	var (
		parts  []string
		params []string
	)
	if rest, ok := strings.CutPrefix(p, externalPrefix); ok {
		parts = strings.Split(rest, "/")
		if len(parts) != 2 {
			return q, errNotFastPath
		}
		q.gv, q.namespace, q.metric, params = externalGV, parts[0], parts[1], externalParams
	} else {
		version, rest, _ := strings.Cut(p[len(customPrefix):], "/")
		gv, ok := customVersions[version]
		ns, ok2 := strings.CutPrefix(rest, "namespaces/")
		if !ok || !ok2 {
			return q, errNotFastPath
		}
		parts = strings.Split(ns, "/")
		// RESOURCE "metrics" is the API's path for metrics of the
		// namespace itself.
		if len(parts) != 4 || parts[2] != "*" || parts[1] == "metrics" {
			return q, errNotFastPath
		}
		q.gv, q.namespace, q.resource, q.metric, params = gv, parts[0], parts[1], parts[3], customParams
	}
	for _, part := range parts {
		if part == "" {
			return q, errNotFastPath
		}
	}
	for k := range req.Header {
		if strings.HasPrefix(k, "Impersonate-") {
			return q, errNotFastPath
		}
	}
	if klog.V(3).Enabled() {
		return q, errNotFastPath // the chain's HTTP logger logs every request at -v 3
	}
	values, err := queryParams(req.URL.RawQuery, params)
	if err != nil {
		return q, err
	}
	// A selector that does not parse: the chain answers 400 naming it.
	if q.selector, err = h.selectors.parse(values[0]); err != nil {
		return q, err
	}
	if len(values) > 1 {
		if q.metricSel, err = h.selectors.parse(values[1]); err != nil {
			return q, err
		}
	}
	media, enc, err := negotiation.NegotiateOutputMediaType(req, h.c.APISerializer, negotiation.DefaultEndpointRestrictions)
	if err != nil || media.Convert != nil || media.Stream != "" || media.Export || media.UseServerVersion != "" || media.Profile != "" || len(media.Unrecognized) > 0 {
		return q, errNotFastPath
	}
	if enc.MediaType != runtime.ContentTypeJSON && enc.MediaType != runtime.ContentTypeProtobuf {
		return q, errNotFastPath
	}
	q.encoding = enc
	q.pretty = enc.PrettySerializer != nil && enc.Serializer == enc.PrettySerializer
	info, err := h.requestInfo(req, values[0])
	if err != nil || !info.IsResourceRequest || info.APIGroup != q.gv.Group || info.APIVersion != q.gv.Version || info.Namespace != q.namespace {
		return q, errNotFastPath
	}
	if q.resource == "" {
		if info.Verb != "list" || info.Resource != q.metric || info.Name != "" || info.Subresource != "" {
			return q, errNotFastPath
		}
	} else if info.Verb != "get" || info.Resource != q.resource || info.Name != "*" || info.Subresource != q.metric {
		return q, errNotFastPath
	}
	q.info = info
	return q, nil
}

// requestInfo is the resolver's RequestInfo for req, whose query holds
// labelSelector (valid, or "") and metricLabelSelector at most. The
// resolver is given the path alone: with a query it decodes the list
// options through the scheme to look for a fieldSelector or watch, which
// these queries cannot hold, at about a tenth of a cached query's CPU. It
// then keeps the label selector of a list, as the resolver does.
func (h *Handler) requestInfo(req *http.Request, labelSelector string) (*apirequest.RequestInfo, error) {
	if req.URL.RawQuery == "" {
		return h.c.RequestInfoResolver.NewRequestInfo(req)
	}
	bare := *req
	u := *req.URL
	u.RawQuery = ""
	bare.URL = &u
	info, err := h.c.RequestInfoResolver.NewRequestInfo(&bare)
	if err == nil && info.Verb == "list" && strings.Contains(req.URL.RawQuery, "labelSelector=") {
		info.LabelSelector = labelSelector
	}
	return info, err
}

// queryParams returns the values of the named parameters of a query string
// ("" for absent ones), which may hold each at most once and nothing else.
func queryParams(rawQuery string, names []string) ([]string, error) {
	values := make([]string, len(names))
	if rawQuery == "" {
		return values, nil
	}
	if strings.Contains(rawQuery, ";") {
		return nil, errNotFastPath
	}
	seen := 0
	for rawQuery != "" {
		var kv string
		kv, rawQuery, _ = strings.Cut(rawQuery, "&")
		k, v, _ := strings.Cut(kv, "=")
		i := slices.Index(names, k)
		if i < 0 || seen&(1<<i) != 0 {
			return nil, errNotFastPath
		}
		seen |= 1 << i
		s, err := url.QueryUnescape(v)
		if err != nil {
			return nil, errNotFastPath
		}
		values[i] = s
	}
	return values, nil
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
	// for MonitorRequest's apiserver_request_sli_duration_seconds, as the
	// chain's WithLatencyTrackers
	ctx = apirequest.WithLatencyTrackers(ctx)
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
	attrs, err := authorizerAttributes(ctx, q)
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
	// as custom-metrics-apiserver's installers instrument their routes
	scope, component := "cluster", "external-metrics"
	if q.resource != "" {
		scope, component = "resource", "custom-metrics"
	}
	endpointsmetrics.MonitorRequest(req, "LIST", q.gv.Group, q.gv.Version, "*", "*", scope, component, false, "", rec.status(), rec.size, time.Since(start))
}

// authorizerAttributes are the chain's (GetAuthorizerAttributes), with the
// label selector's requirements taken from q's parsed selector instead of a
// parse of the same string per request.
func authorizerAttributes(ctx context.Context, q query) (authorizer.Attributes, error) {
	if q.info.LabelSelector == "" || q.selector == nil {
		return genericapifilters.GetAuthorizerAttributes(ctx)
	}
	info := *q.info
	info.LabelSelector = ""
	attrs, err := genericapifilters.GetAuthorizerAttributes(apirequest.WithRequestInfo(ctx, &info))
	if err != nil {
		return nil, err
	}
	rec, ok := attrs.(*authorizer.AttributesRecord)
	if !ok {
		return genericapifilters.GetAuthorizerAttributes(ctx)
	}
	if reqs, _ := q.selector.Requirements(); len(reqs) > 0 {
		rec.LabelSelectorRequirements = reqs
	}
	return rec, nil
}

// answer queries the provider and writes its answer or error, as the
// chain's list handlers do.
func (h *Handler) answer(w http.ResponseWriter, req *http.Request, q query) {
	ctx := apirequest.WithNamespace(req.Context(), q.namespace)
	if q.resource != "" {
		// custom-metrics-apiserver's REST.List for a wildcard name; its
		// handler writes the provider's list as is.
		list, err := h.c.Custom.GetMetricBySelector(ctx, q.namespace, q.selector,
			provider.CustomMetricInfo{GroupResource: schema.ParseGroupResource(q.resource), Metric: q.metric, Namespaced: q.namespace != ""}, q.metricSel)
		if err != nil {
			responsewriters.ErrorNegotiated(err, h.c.APISerializer, q.gv, w, req)
			return
		}
		fresh := h.freshness[custom_metrics.GroupName]
		for i := range list.Items {
			fresh.Observe(list.Items[i].Timestamp)
		}
		h.write(w, req, q, list, nil, 0)
		return
	}
	list, err := h.c.External.GetExternalMetric(ctx, q.namespace, q.selector, provider.ExternalMetricInfo{Metric: q.metric})
	if err != nil {
		responsewriters.ErrorNegotiated(err, h.c.APISerializer, q.gv, w, req)
		return
	}
	fresh := h.freshness[external_metrics.GroupName]
	for i := range list.Items {
		fresh.Observe(list.Items[i].Timestamp)
	}
	if list.Items == nil {
		// as the chain's transformResponseObject: "items": [], not null
		list = &external_metrics.ExternalMetricValueList{ListMeta: list.ListMeta, Items: []external_metrics.ExternalMetricValue{}}
	}
	var first *external_metrics.ExternalMetricValue
	if len(list.Items) > 0 && list.ListMeta == (metav1.ListMeta{}) {
		first = &list.Items[0]
	}
	h.write(w, req, q, list, first, len(list.Items))
}

// write encodes obj as the chain's SerializeObject does (gzip included);
// a small external list in JSON by writeExternalJSON, a large one (first,
// n: its items) once per provider answer, serializer and Accept-Encoding.
func (h *Handler) write(w http.ResponseWriter, req *http.Request, q query, obj runtime.Object, first *external_metrics.ExternalMetricValue, n int) {
	if l, ok := obj.(*external_metrics.ExternalMetricValueList); ok && n < minCachedItems && q.encoding.MediaType == runtime.ContentTypeJSON &&
		!q.pretty && q.gv == externalGV && writeExternalJSON(w, l) {
		return
	}
	encoder := h.c.APISerializer.EncoderForVersion(q.encoding.Serializer, q.gv)
	if first == nil || n < minCachedItems || !h.encoded.enabled() {
		responsewriters.SerializeObject(q.encoding.MediaType, encoder, w, req, http.StatusOK, obj)
		return
	}
	key := encodedKey{
		first: weak.Make(first), n: n,
		serializer: q.encoding.Serializer.Identifier(), acceptEncoding: req.Header.Get("Accept-Encoding"),
	}
	if e := h.encoded.get(key); e != nil {
		e.writeTo(w)
		return
	}
	rec := newCapture()
	responsewriters.SerializeObject(q.encoding.MediaType, encoder, rec, req, http.StatusOK, obj)
	e := rec.entry()
	if e.status == http.StatusOK {
		h.encoded.put(key, e)
	}
	e.writeTo(w)
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
