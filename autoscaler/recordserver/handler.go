// Package recordserver serves the autoscaler's recordings over HTTPS, to
// callers the API server authenticates (TokenReview, or a client
// certificate of its CA) and authorizes (SubjectAccessReview): a GET of
//
//	/apis/autoscaling.metricscale.dev/v1alpha1/namespaces/NS/metricautoscalers/NAME/record[?last=30m]
//
// is allowed to whoever may `get` the resource `metricautoscalers/record`
// in NS, so that RBAC grants it as any subresource (the metricscale-record
// ClusterRole). Anonymous requests get 401, unauthorized ones 403, an
// object without a recording 404 naming it, and a replica that does not
// lead (it reconciles nothing) 503 naming the leader.
package recordserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/record"
)

// Subresource is the subresource a caller must be allowed to get.
const Subresource = "record"

// LeaderHeader carries the leader's identity on a 503 from a replica that
// does not lead.
const LeaderHeader = "X-Metricscale-Leader"

var groupResource = schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: v1alpha1.Resource}

// Path is the URL path of an object's recording.
func Path(namespace, name string) string {
	return fmt.Sprintf("/apis/%s/namespaces/%s/%s/%s/%s", v1alpha1.GroupVersion, namespace, v1alpha1.Resource, name, Subresource)
}

// Handler serves recordings.
type Handler struct {
	Authenticator authenticator.Request
	Authorizer    authorizer.Authorizer
	Recorder      *record.Recorder
	// Leader says whether this replica leads, and which one does.
	Leader func() (leading bool, leader string)
	// Identity is this replica's, for messages.
	Identity string
	Now      func() time.Time
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	resp, ok, err := h.Authenticator.AuthenticateRequest(req)
	if err != nil || !ok || resp == nil || resp.User == nil || resp.User.GetName() == user.Anonymous {
		if err != nil {
			klog.FromContext(req.Context()).V(2).Info("Record request not authenticated", "err", err)
		}
		writeStatus(w, apierrors.NewUnauthorized("authentication required: a bearer token or a client certificate the API server accepts"))
		return
	}
	u := resp.User
	ns, name, ok := parse(req.URL.Path)
	if !ok {
		writeStatus(w, apierrors.NewGenericServerResponse(http.StatusNotFound, req.Method, groupResource, "", "only "+Path("NAMESPACE", "NAME")+" is served here", 0, false))
		return
	}
	if req.Method != http.MethodGet {
		writeStatus(w, apierrors.NewMethodNotSupported(groupResource, req.Method))
		return
	}
	attrs := authorizer.AttributesRecord{
		User: u, Verb: "get", Namespace: ns, APIGroup: groupResource.Group, APIVersion: v1alpha1.GroupVersion.Version,
		Resource: groupResource.Resource, Subresource: Subresource, Name: name, ResourceRequest: true, Path: req.URL.Path,
	}
	decision, reason, err := h.Authorizer.Authorize(req.Context(), attrs)
	if decision != authorizer.DecisionAllow {
		msg := fmt.Sprintf("User %q cannot get resource %q in API group %q in the namespace %q", u.GetName(), groupResource.Resource+"/"+Subresource, groupResource.Group, ns)
		if reason != "" {
			msg += ": " + reason
		}
		if err != nil {
			msg += ": " + err.Error()
		}
		writeStatus(w, apierrors.NewForbidden(groupResource, name, errors.New(msg)))
		return
	}
	if h.Leader != nil {
		if leading, leader := h.Leader(); !leading {
			w.Header().Set(LeaderHeader, leader)
			msg := fmt.Sprintf("this autoscaler replica (%s) does not lead and has recorded nothing; the leader is %q: ask it", h.Identity, leader)
			if leader == "" {
				msg = fmt.Sprintf("this autoscaler replica (%s) does not lead and no leader is known yet: try again", h.Identity)
			}
			writeStatus(w, apierrors.NewServiceUnavailable(msg))
			return
		}
	}
	var since time.Time
	if last := req.URL.Query().Get("last"); last != "" {
		d, err := time.ParseDuration(last)
		if err != nil || d <= 0 {
			writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("last: want a positive duration such as 30m, got %q", last)))
			return
		}
		since = h.Now().Add(-d)
	}
	rec, err := h.Recorder.Export(ns, name, since)
	if errors.Is(err, record.ErrNotRecorded) {
		nf := apierrors.NewNotFound(groupResource, name)
		nf.ErrStatus.Message = fmt.Sprintf("%s %q not found in namespace %q: %v (the autoscaler records with --record, from the first reconcile of the object since this replica leads)", groupResource, name, ns, err)
		writeStatus(w, nf)
		return
	}
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	klog.FromContext(req.Context()).V(2).Info("Serving a recording", "user", u.GetName(), "metricAutoscaler", klog.KRef(ns, name), "steps", len(rec.Recorded))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if err := json.NewEncoder(w).Encode(rec); err != nil {
		klog.FromContext(req.Context()).V(2).Info("Writing a recording failed", "err", err)
	}
}

// parse reads namespace and name from a recording's path.
func parse(path string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(path, "/apis/"+v1alpha1.GroupVersion.String()+"/namespaces/")
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 || parts[1] != v1alpha1.Resource || parts[3] != Subresource ||
		len(validation.IsDNS1123Label(parts[0])) > 0 || len(validation.IsDNS1123Subdomain(parts[2])) > 0 {
		return "", "", false
	}
	return parts[0], parts[2], true
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.ErrStatus
	st.Kind, st.APIVersion = "Status", "v1"
	st.Status = metav1.StatusFailure
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}
