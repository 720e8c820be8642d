// Package fakekube is a small stand-in for kube-apiserver, for tests and
// benchmarks that run the real adapter in-process without a cluster. It
// serves what the adapter asks of a cluster: discovery (core v1 and apps/v1),
// TokenReview and SubjectAccessReview (delegated authentication and
// authorization, answered from tables the test sets), and list/watch of pods
// and nodes as metadata. It counts requests so tests can assert the adapter does not
// LIST per query.
package fakekube

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// User is an identity a token maps to.
type User struct {
	Name   string
	Groups []string
}

// Server is the fake API server.
type Server struct {
	*httptest.Server

	mu     sync.Mutex
	tokens map[string]User
	// allowed holds "user verb group resource" entries and "user *" for
	// everything.
	allowed  map[string]bool
	pods     map[string]*metav1.PartialObjectMetadata // ns/name
	nodes    map[string]*metav1.PartialObjectMetadata // name
	rv       int
	watchers map[chan watchEvent]bool
	history  []watchEvent

	// counters
	PodLists        atomic.Int64
	PodWatches      atomic.Int64
	NodeLists       atomic.Int64
	TokenReviews    atomic.Int64
	AccessReviews   atomic.Int64
	DiscoveryCalls  atomic.Int64
	UnhandledPaths  atomic.Int64
	lastUnhandledMu sync.Mutex
	lastUnhandled   string
	reviewSpecs     []authorizationv1.SubjectAccessReviewSpec
}

type watchEvent struct {
	Resource string // pods or nodes
	Type     watch.EventType
	Object   *metav1.PartialObjectMetadata
}

// New starts a fake API server on loopback.
func New() *Server {
	s := &Server{
		tokens:   map[string]User{},
		allowed:  map[string]bool{},
		pods:     map[string]*metav1.PartialObjectMetadata{},
		nodes:    map[string]*metav1.PartialObjectMetadata{},
		rv:       1,
		watchers: map[chan watchEvent]bool{},
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// AddToken makes token authenticate as u.
func (s *Server) AddToken(token string, u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = u
}

// Allow lets user do verb on group/resource ("*" for any of them).
func (s *Server) Allow(user, verb, group, resource string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allowed[strings.Join([]string{user, verb, group, resource}, " ")] = true
}

// AllowPath lets user do verb on the non-resource URL path.
func (s *Server) AllowPath(user, verb, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allowed[strings.Join([]string{user, verb, "path", path}, " ")] = true
}

// AllowAll lets user do anything (including non-resource URLs).
func (s *Server) AllowAll(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allowed[user+" *"] = true
}

// WriteKubeconfig writes a kubeconfig for the server, authenticating with
// token, into dir and returns its path.
func (s *Server) WriteKubeconfig(dir, token string) (string, error) {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: %s
users:
- name: adapter
  user:
    token: %s
contexts:
- name: fake
  context:
    cluster: fake
    user: adapter
current-context: fake
`, s.URL, token)
	p := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		return "", fmt.Errorf("writing kubeconfig: %w", err)
	}
	return p, nil
}

// SetPod adds or updates a pod (metadata only).
func (s *Server) SetPod(ns, name string, lbls map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	key := ns + "/" + name
	typ := watch.Modified
	if _, ok := s.pods[key]; !ok {
		typ = watch.Added
	}
	p := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, Labels: lbls, UID: types.UID(key),
			ResourceVersion: strconv.Itoa(s.rv),
		},
	}
	s.pods[key] = p
	s.broadcast(watchEvent{Resource: "pods", Type: typ, Object: p})
}

// SetNode adds or updates a node (metadata only).
func (s *Server) SetNode(name string, lbls map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	typ := watch.Modified
	if _, ok := s.nodes[name]; !ok {
		typ = watch.Added
	}
	n := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: lbls, UID: types.UID("node/" + name), ResourceVersion: strconv.Itoa(s.rv),
		},
	}
	s.nodes[name] = n
	s.broadcast(watchEvent{Resource: "nodes", Type: typ, Object: n})
}

// DeletePod removes a pod.
func (s *Server) DeletePod(ns, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := ns + "/" + name
	p, ok := s.pods[key]
	if !ok {
		return
	}
	delete(s.pods, key)
	s.rv++
	p = p.DeepCopy()
	p.ResourceVersion = strconv.Itoa(s.rv)
	s.broadcast(watchEvent{Resource: "pods", Type: watch.Deleted, Object: p})
}

func (s *Server) broadcast(ev watchEvent) {
	s.history = append(s.history, ev)
	for ch := range s.watchers {
		select {
		case ch <- ev:
		default: // a slow watcher misses events; tests keep watchers fast
		}
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func status(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	writeJSON(w, code, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg,
	})
}

func resource(name, kind string, namespaced bool, short ...string) metav1.APIResource {
	singular := strings.ToLower(kind)
	return metav1.APIResource{Name: name, SingularName: singular, Namespaced: namespaced, Kind: kind,
		Verbs: metav1.Verbs{"get", "list", "watch"}, ShortNames: short}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == "/api":
		s.DiscoveryCalls.Add(1)
		writeJSON(w, 200, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}})
	case p == "/apis":
		s.DiscoveryCalls.Add(1)
		gv := func(g string) metav1.APIGroup {
			v := metav1.GroupVersionForDiscovery{GroupVersion: g + "/v1", Version: "v1"}
			return metav1.APIGroup{Name: g, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
		}
		writeJSON(w, 200, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups: []metav1.APIGroup{gv("apps"), gv("batch")}})
	case p == "/api/v1":
		s.DiscoveryCalls.Add(1)
		writeJSON(w, 200, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "v1",
			APIResources: []metav1.APIResource{
				resource("pods", "Pod", true, "po"), resource("services", "Service", true, "svc"),
				resource("namespaces", "Namespace", false, "ns"), resource("nodes", "Node", false, "no"),
				resource("configmaps", "ConfigMap", true, "cm"),
			}})
	case p == "/apis/apps/v1":
		s.DiscoveryCalls.Add(1)
		writeJSON(w, 200, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "apps/v1",
			APIResources: []metav1.APIResource{resource("deployments", "Deployment", true, "deploy"), resource("statefulsets", "StatefulSet", true, "sts"), resource("replicasets", "ReplicaSet", true, "rs")}})
	case p == "/apis/batch/v1":
		s.DiscoveryCalls.Add(1)
		writeJSON(w, 200, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "batch/v1",
			APIResources: []metav1.APIResource{resource("jobs", "Job", true)}})
	case p == "/version":
		writeJSON(w, 200, map[string]string{"major": "1", "minor": "36", "gitVersion": "v1.36.0-fake"})
	case p == "/apis/authentication.k8s.io/v1/tokenreviews" && r.Method == http.MethodPost:
		s.tokenReview(w, r)
	case p == "/apis/authorization.k8s.io/v1/subjectaccessreviews" && r.Method == http.MethodPost:
		s.accessReview(w, r)
	case p == "/api/v1/pods" || (strings.HasPrefix(p, "/api/v1/namespaces/") && strings.HasSuffix(p, "/pods")):
		ns := ""
		if strings.HasPrefix(p, "/api/v1/namespaces/") {
			ns = strings.TrimSuffix(strings.TrimPrefix(p, "/api/v1/namespaces/"), "/pods")
		}
		if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
			s.watch(w, r, "pods", ns)
		} else {
			s.listPods(w, r, ns)
		}
	case p == "/api/v1/nodes":
		if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
			s.watch(w, r, "nodes", "")
		} else {
			s.listNodes(w, r)
		}
	default:
		s.UnhandledPaths.Add(1)
		s.lastUnhandledMu.Lock()
		s.lastUnhandled = r.Method + " " + r.URL.String()
		s.lastUnhandledMu.Unlock()
		status(w, http.StatusNotFound, metav1.StatusReasonNotFound, "fakekube: not served: "+p)
	}
}

// LastUnhandled returns the last request the fake could not answer.
func (s *Server) LastUnhandled() string {
	s.lastUnhandledMu.Lock()
	defer s.lastUnhandledMu.Unlock()
	return s.lastUnhandled
}

// AccessReviewSpecs returns the specs of the SubjectAccessReviews received,
// in order: the authorization attributes the adapter asked about.
func (s *Server) AccessReviewSpecs() []authorizationv1.SubjectAccessReviewSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]authorizationv1.SubjectAccessReviewSpec(nil), s.reviewSpecs...)
}

func (s *Server) tokenReview(w http.ResponseWriter, r *http.Request) {
	s.TokenReviews.Add(1)
	var tr authenticationv1.TokenReview
	if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
		status(w, 400, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	s.mu.Lock()
	u, ok := s.tokens[tr.Spec.Token]
	s.mu.Unlock()
	tr.Status = authenticationv1.TokenReviewStatus{Authenticated: ok}
	if ok {
		tr.Status.User = authenticationv1.UserInfo{Username: u.Name, Groups: append([]string{"system:authenticated"}, u.Groups...)}
	} else {
		tr.Status.Error = "unknown token"
	}
	tr.Spec.Token = ""
	tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview"
	writeJSON(w, 201, &tr)
}

func (s *Server) accessReview(w http.ResponseWriter, r *http.Request) {
	s.AccessReviews.Add(1)
	var sar authorizationv1.SubjectAccessReview
	if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
		status(w, 400, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	user := sar.Spec.User
	s.mu.Lock()
	s.reviewSpecs = append(s.reviewSpecs, *sar.Spec.DeepCopy())
	allowed := s.allowed[user+" *"]
	if ra := sar.Spec.ResourceAttributes; ra != nil && !allowed {
		for _, verb := range []string{ra.Verb, "*"} {
			for _, group := range []string{ra.Group, "*"} {
				for _, res := range []string{ra.Resource, "*"} {
					if s.allowed[strings.Join([]string{user, verb, group, res}, " ")] {
						allowed = true
					}
				}
			}
		}
	}
	if nra := sar.Spec.NonResourceAttributes; nra != nil && s.allowed[strings.Join([]string{user, nra.Verb, "path", nra.Path}, " ")] {
		allowed = true
	}
	// like the system:discovery ClusterRole: authenticated users may read
	// discovery documents
	if nra := sar.Spec.NonResourceAttributes; nra != nil && nra.Verb == "get" &&
		(nra.Path == "/api" || nra.Path == "/apis" || strings.HasPrefix(nra.Path, "/api/") || strings.HasPrefix(nra.Path, "/apis/")) {
		for _, g := range sar.Spec.Groups {
			if g == "system:authenticated" {
				allowed = true
			}
		}
	}
	s.mu.Unlock()
	sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: allowed}
	if !allowed {
		sar.Status.Reason = "fakekube: not allowed"
	}
	sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
	writeJSON(w, 201, &sar)
}

func (s *Server) podsIn(ns string, sel labels.Selector) []metav1.PartialObjectMetadata {
	var out []metav1.PartialObjectMetadata
	for _, p := range s.pods {
		if (ns == "" || p.Namespace == ns) && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, *p.DeepCopy())
		}
	}
	return out
}

func (s *Server) listPods(w http.ResponseWriter, r *http.Request, ns string) {
	s.PodLists.Add(1)
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		status(w, 400, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	s.mu.Lock()
	list := &metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)},
		Items:    s.podsIn(ns, sel),
	}
	s.mu.Unlock()
	writeJSON(w, 200, list)
}

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	s.NodeLists.Add(1)
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		status(w, 400, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	s.mu.Lock()
	list := &metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)},
	}
	for _, n := range s.nodes {
		if sel.Matches(labels.Set(n.Labels)) {
			list.Items = append(list.Items, *n.DeepCopy())
		}
	}
	s.mu.Unlock()
	writeJSON(w, 200, list)
}

// watch streams the events of resource (pods or nodes) in ns ("" all).
func (s *Server) watch(w http.ResponseWriter, r *http.Request, resource, ns string) {
	if r.URL.Query().Get("sendInitialEvents") == "true" {
		// like an API server without WatchList: the client falls back to LIST
		status(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "fakekube: sendInitialEvents is not supported")
		return
	}
	if resource == "pods" {
		s.PodWatches.Add(1)
	}
	ch := make(chan watchEvent, 1024)
	from, _ := strconv.Atoi(r.URL.Query().Get("resourceVersion"))
	s.mu.Lock()
	for _, ev := range s.history {
		if rv, _ := strconv.Atoi(ev.Object.ResourceVersion); rv > from {
			select {
			case ch <- ev:
			default:
			}
		}
	}
	s.watchers[ch] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(200)
	fl, _ := w.(http.Flusher)
	if fl != nil {
		fl.Flush()
	}
	enc := json.NewEncoder(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-ch:
			if ev.Resource != resource || (ns != "" && ev.Object.Namespace != ns) {
				continue
			}
			raw, err := json.Marshal(ev.Object)
			if err != nil {
				return
			}
			if err := enc.Encode(&metav1.WatchEvent{Type: string(ev.Type), Object: runtimeRaw(raw)}); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
	}
}

func runtimeRaw(b []byte) runtime.RawExtension { return runtime.RawExtension{Raw: b} }
