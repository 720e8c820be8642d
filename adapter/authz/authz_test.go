package authz

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// recorder answers unconditionally from a table of (resource, namespace) and records the
// attributes it was asked about.
type recorder struct {
	allow map[string]bool // resource + "/" + namespace
	err   error           // for resource "*"
	asked []authorizer.AttributesRecord
}

func (r *recorder) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	r.asked = append(r.asked, authorizer.AttributesRecord{
		User: a.GetUser(), Verb: a.GetVerb(), APIGroup: a.GetAPIGroup(), APIVersion: a.GetAPIVersion(),
		Namespace: a.GetNamespace(), Resource: a.GetResource(), Subresource: a.GetSubresource(),
		Name: a.GetName(), ResourceRequest: a.IsResourceRequest(), Path: a.GetPath(),
	})
	if a.GetResource() == "*" && r.err != nil {
		return authorizer.DecisionNoOpinion, "", r.err
	}
	if r.allow[a.GetResource()+"/"+a.GetNamespace()] {
		return authorizer.DecisionAllow, "allowed " + a.GetResource(), nil
	}
	return authorizer.DecisionNoOpinion, "no rule for " + a.GetResource(), nil
}

func (r *recorder) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(r.Authorize(ctx, a))
}

func (r *recorder) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func TestGroupWide(t *testing.T) {
	t.Parallel()
	reader := &user.DefaultInfo{Name: "system:serviceaccount:metricscale:metricscale-autoscaler"}
	external := authorizer.AttributesRecord{User: reader, Verb: "list", APIGroup: "external.metrics.k8s.io", APIVersion: "v1beta1",
		Namespace: "shop", Resource: "queue_depth", ResourceRequest: true, Path: "/apis/external.metrics.k8s.io/v1beta1/namespaces/shop/queue_depth"}
	custom := authorizer.AttributesRecord{User: reader, Verb: "get", APIGroup: "custom.metrics.k8s.io", APIVersion: "v1beta2",
		Namespace: "shop", Resource: "pods", Name: "*", Subresource: "http_requests", ResourceRequest: true}
	wide := func(a authorizer.AttributesRecord) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: a.User, Verb: a.Verb, APIGroup: a.APIGroup, APIVersion: a.APIVersion, Resource: "*", ResourceRequest: true}
	}
	write := external
	write.Verb = "create"
	other := external
	other.APIGroup = "apps"
	nonResource := authorizer.AttributesRecord{User: reader, Verb: "get", Path: "/changes"}

	cases := []struct {
		name       string
		allow      map[string]bool
		wideErr    error
		in         authorizer.AttributesRecord
		want       authorizer.Decision
		wantReason string
		wantAsked  []authorizer.AttributesRecord
	}{
		{"external read, group-wide grant", map[string]bool{"*/": true}, nil, external,
			authorizer.DecisionAllow, "allowed *", []authorizer.AttributesRecord{wide(external)}},
		{"custom read, group-wide grant", map[string]bool{"*/": true}, nil, custom,
			authorizer.DecisionAllow, "allowed *", []authorizer.AttributesRecord{wide(custom)}},
		{"a grant of this metric only", map[string]bool{"queue_depth/shop": true}, nil, external,
			authorizer.DecisionAllow, "allowed queue_depth", []authorizer.AttributesRecord{wide(external), external}},
		{"a grant in the namespace only", map[string]bool{"*/shop": true}, nil, external,
			authorizer.DecisionNoOpinion, "no rule for queue_depth", []authorizer.AttributesRecord{wide(external), external}},
		{"no grant: the request's own answer", nil, nil, external,
			authorizer.DecisionNoOpinion, "no rule for queue_depth", []authorizer.AttributesRecord{wide(external), external}},
		{"the group-wide question fails", map[string]bool{"queue_depth/shop": true}, errors.New("webhook down"), external,
			authorizer.DecisionAllow, "allowed queue_depth", []authorizer.AttributesRecord{wide(external), external}},
		{"not a read", map[string]bool{"*/": true}, nil, write,
			authorizer.DecisionNoOpinion, "no rule for queue_depth", []authorizer.AttributesRecord{write}},
		{"another group", map[string]bool{"*/": true}, nil, other,
			authorizer.DecisionNoOpinion, "no rule for queue_depth", []authorizer.AttributesRecord{other}},
		{"a non-resource request", map[string]bool{"*/": true}, nil, nonResource,
			authorizer.DecisionNoOpinion, "no rule for ", []authorizer.AttributesRecord{nonResource}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			next := &recorder{allow: tc.allow, err: tc.wideErr}
			got, reason, err := GroupWide(next, "external.metrics.k8s.io", "custom.metrics.k8s.io").Authorize(context.Background(), tc.in)
			if err != nil || got != tc.want || reason != tc.wantReason {
				t.Errorf("Authorize = %v, %q, %v; want %v, %q, nil", got, reason, err, tc.want, tc.wantReason)
			}
			checkAsked(t, next.asked, tc.wantAsked)

			next = &recorder{allow: tc.allow, err: tc.wideErr}
			d := GroupWide(next, "external.metrics.k8s.io", "custom.metrics.k8s.io").ConditionsAwareAuthorize(context.Background(), tc.in)
			if d.IsAllow() != (tc.want == authorizer.DecisionAllow) || d.Reason() != tc.wantReason || d.Error() != nil {
				t.Errorf("ConditionsAwareAuthorize = %v; want %v, %q", d, tc.want, tc.wantReason)
			}
			checkAsked(t, next.asked, tc.wantAsked)
		})
	}
}

func checkAsked(t *testing.T, asked, want []authorizer.AttributesRecord) {
	t.Helper()
	if len(asked) != len(want) {
		t.Fatalf("asked %+v; want %+v", asked, want)
	}
	for i := range want {
		if !reflect.DeepEqual(asked[i], want[i]) {
			t.Errorf("question %d: %+v; want %+v", i, asked[i], want[i])
		}
	}
}
