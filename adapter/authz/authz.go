// Package authz puts a group-wide check in front of the adapter's
// delegated authorizer, so that a reader allowed every metric of a group
// costs kube-apiserver one SubjectAccessReview per cache period instead of
// one per metric.
//
// Why: the delegated authorizer caches each answer by its attributes, and
// a metric read's resource is the metric (external.metrics.k8s.io) or its
// subresource (custom.metrics.k8s.io). An autoscaler reading 1,000 metrics
// sent 1,000 SubjectAccessReviews every 10 s, about one a decision, though
// its ClusterRole grants resources "*" on both groups, as the HPA
// controller's and prometheus-adapter's do.
package authz

import (
	"context"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// groupWide answers a metric read that a reader may make on every resource
// of its group in every namespace without asking about the metric itself.
type groupWide struct {
	next   authorizer.Authorizer
	groups map[string]bool
}

// GroupWide returns an authorizer that, for a read (get, list, watch) of a
// resource in one of groups, first asks next whether the user may make it
// on resource "*" of that group cluster-wide (namespace "", no name,
// subresource or selector), and allows the read when it may. Otherwise,
// and for every other request, next decides on the request's own
// attributes. The group-wide question only widens the request, so its
// allow implies the request's own under RBAC; its answer is cached by
// next like any other (one entry per user, verb and group).
func GroupWide(next authorizer.Authorizer, groups ...string) authorizer.Authorizer {
	g := &groupWide{next: next, groups: map[string]bool{}}
	for _, group := range groups {
		g.groups[group] = true
	}
	return g
}

func (g *groupWide) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if reason, ok := g.allowedGroupWide(ctx, a); ok {
		return authorizer.DecisionAllow, reason, nil
	}
	return g.next.Authorize(ctx, a)
}

// ConditionsAwareAuthorize allows unconditionally what the group-wide
// question allows unconditionally; next answers the rest, conditions and
// all.
func (g *groupWide) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	if reason, ok := g.allowedGroupWide(ctx, a); ok {
		return authorizer.ConditionsAwareDecisionAllow(reason, nil)
	}
	return g.next.ConditionsAwareAuthorize(ctx, a)
}

// EvaluateConditions evaluates next's conditional decisions: the
// group-wide allow has no conditions.
func (g *groupWide) EvaluateConditions(ctx context.Context, d authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return g.next.EvaluateConditions(ctx, d, data)
}

// allowedGroupWide asks next about a, widened to every resource of its
// group in every namespace, when a is a read in one of the groups.
func (g *groupWide) allowedGroupWide(ctx context.Context, a authorizer.Attributes) (string, bool) {
	if !a.IsResourceRequest() || !g.groups[a.GetAPIGroup()] || !isRead(a.GetVerb()) {
		return "", false
	}
	wide := authorizer.AttributesRecord{
		User:            a.GetUser(),
		Verb:            a.GetVerb(),
		APIGroup:        a.GetAPIGroup(),
		APIVersion:      a.GetAPIVersion(),
		Resource:        "*",
		ResourceRequest: true,
	}
	d, reason, err := g.next.Authorize(ctx, wide)
	return reason, err == nil && d == authorizer.DecisionAllow
}

func isRead(verb string) bool {
	return verb == "get" || verb == "list" || verb == "watch"
}
