package convert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/scale"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// The handover label's values.
const (
	handoverPending = "pending"
	handoverDone    = "done"
)

// Handover replaces live HPAs with MetricAutoscalers without a replica
// jump and without two autoscalers acting at once:
//
//  1. create the MetricAutoscaler paused (a paused MetricAutoscaler writes
//     nothing: neither the scale nor its status), labelled handover=pending,
//     and write its starting status through the status subresource
//     (StartingStatus);
//  2. delete the HPA (precondition: its UID) and wait until the API server
//     no longer has it, then Delay more, for a reconcile the HPA's
//     controller began before the delete to finish;
//  3. read the target's size again, rewrite the starting status from it
//     (a rescale made in step 2 is then the starting point), and unpause in
//     one patch that also sets handover=done.
//
// Until step 3 only the HPA scales; after it only the MetricAutoscaler.
// The time between is Delay plus a few API calls: shorter than an HPA's
// sync period (15s by default), so no decision is missed that the HPA would
// have made. Run again after a failure, it resumes where it stopped.
type Handover struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Scales  scale.ScalesGetter
	Mapper  apimeta.RESTMapper
	Clock   clock.Clock
	// Delay is the wait after the HPA is gone (default 3s).
	Delay time.Duration
	// Timeout bounds the wait for the HPA to be gone (default 1m).
	Timeout time.Duration
	Options HPAOptions
	// Log receives one line per step.
	Log io.Writer
}

// HandoverResult is what one handover did.
type HandoverResult struct {
	// Replicas is the target's size when the MetricAutoscaler took over.
	Replicas int32
	// AlreadyDone: the handover had been completed by an earlier run.
	AlreadyDone bool
	// Notes say what of the HPA's history could not be rebuilt.
	Notes []string
}

func (h *Handover) logf(format string, args ...any) {
	if h.Log != nil {
		fmt.Fprintf(h.Log, format+"\n", args...)
	}
}

func (h *Handover) mas(ns string) dynamic.ResourceInterface {
	return h.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns)
}

// Run hands the HPA ns/name over to a MetricAutoscaler of the same name.
func (h *Handover) Run(ctx context.Context, ns, name string) (HandoverResult, error) {
	ref := ns + "/" + name
	hpa, err := h.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return HandoverResult{}, fmt.Errorf("reading HorizontalPodAutoscaler %s: %w", ref, err)
	}
	if apierrors.IsNotFound(err) {
		hpa = nil
	}
	ma, err := h.getMA(ctx, ns, name)
	if err != nil && !apierrors.IsNotFound(err) {
		return HandoverResult{}, err
	}
	if apierrors.IsNotFound(err) {
		ma = nil
	}

	switch {
	case hpa == nil && ma == nil:
		return HandoverResult{}, fmt.Errorf("HorizontalPodAutoscaler %s not found", ref)
	case hpa == nil && ma.Labels[LabelHandover] == handoverDone:
		h.logf("metricautoscaler %s: already handed over", ref)
		return HandoverResult{AlreadyDone: true, Replicas: ma.Status.CurrentReplicas}, nil
	case hpa == nil && ma.Labels[LabelHandover] == handoverPending:
		// the HPA was deleted by an earlier run that stopped before the end
		h.logf("metricautoscaler %s: resuming a handover whose HPA is gone", ref)
		return h.finish(ctx, ma, nil)
	case hpa == nil:
		return HandoverResult{}, fmt.Errorf("HorizontalPodAutoscaler %s not found (MetricAutoscaler %s exists, not from a handover)", ref, ref)
	case ma != nil && (ma.Labels[LabelHandover] != handoverPending || ma.Annotations[AnnotationFromUID] != string(hpa.UID)):
		return HandoverResult{}, fmt.Errorf("MetricAutoscaler %s exists and is not a pending handover of HorizontalPodAutoscaler %s (uid %s): refusing to overwrite it; delete or rename it first", ref, ref, hpa.UID)
	}
	if err := h.checkNoOtherAutoscaler(ctx, hpa); err != nil {
		return HandoverResult{}, err
	}

	// 1. the MetricAutoscaler, paused, with its starting status
	want, err := FromHPA(hpa, h.Options)
	if err != nil {
		return HandoverResult{}, err
	}
	want.Spec.Paused = true
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	want.Labels[LabelHandover] = handoverPending
	want.Annotations[AnnotationFromUID] = string(hpa.UID)
	// a target without a readable scale: refused before anything is created
	if _, err := h.targetReplicas(ctx, want); err != nil {
		return HandoverResult{}, err
	}
	if ma == nil {
		if ma, err = h.createMA(ctx, want); err != nil {
			return HandoverResult{}, err
		}
		h.logf("metricautoscaler %s: created, paused", ref)
	} else {
		// an earlier run created it: bring its spec up to the HPA's
		ma.Spec, ma.Labels, ma.Annotations = want.Spec, want.Labels, want.Annotations
		if ma, err = h.updateMA(ctx, ma); err != nil {
			return HandoverResult{}, err
		}
		h.logf("metricautoscaler %s: found from an earlier run, paused, spec updated", ref)
	}
	if _, _, err := h.writeStatus(ctx, ma, hpa); err != nil {
		return HandoverResult{}, err
	}

	// 2. the HPA deleted, and gone
	uid := hpa.UID
	err = h.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return HandoverResult{}, fmt.Errorf("deleting HorizontalPodAutoscaler %s: %w (the MetricAutoscaler stays paused; run again)", ref, err)
	}
	h.logf("horizontalpodautoscaler %s: deleted", ref)
	if err := h.waitGone(ctx, ns, name, uid); err != nil {
		return HandoverResult{}, err
	}
	return h.finish(ctx, ma, hpa)
}

// finish waits Delay, rewrites the starting status from the target's size
// now and unpauses. hpa is the deleted HPA, or nil when an earlier run
// deleted it (its status then comes from the MetricAutoscaler's).
func (h *Handover) finish(ctx context.Context, ma *v1alpha1.MetricAutoscaler, hpa *autoscalingv2.HorizontalPodAutoscaler) (HandoverResult, error) {
	ref := ma.Namespace + "/" + ma.Name
	delay := h.Delay
	if delay == 0 {
		delay = 3 * time.Second
	}
	select {
	case <-ctx.Done():
		return HandoverResult{}, ctx.Err()
	case <-h.Clock.After(delay):
	}
	latest, err := h.getMA(ctx, ma.Namespace, ma.Name)
	if err != nil {
		return HandoverResult{}, err
	}
	if hpa == nil {
		// the HPA as the status written from it in step 1 remembers it
		hpa = &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: latest.Name, Namespace: latest.Namespace, UID: types.UID(latest.Annotations[AnnotationFromUID])},
			Spec:       latest.Spec.HPASpec(),
			Status: autoscalingv2.HorizontalPodAutoscalerStatus{
				LastScaleTime:   latest.Status.LastScaleTime,
				DesiredReplicas: latest.Status.DesiredReplicas,
				CurrentMetrics:  latest.Status.CurrentMetrics,
				Conditions:      latest.Status.Conditions,
			},
		}
	}
	replicas, notes, err := h.writeStatus(ctx, latest, hpa)
	if err != nil {
		return HandoverResult{}, err
	}
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"labels": map[string]any{LabelHandover: handoverDone}},
		"spec":     map[string]any{"paused": nil},
	})
	if _, err := h.mas(ma.Namespace).Patch(ctx, ma.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return HandoverResult{}, fmt.Errorf("unpausing MetricAutoscaler %s: %w (run again to finish)", ref, err)
	}
	h.logf("metricautoscaler %s: unpaused at %d replicas: it scales %s/%s now", ref, replicas, ma.Spec.ScaleTargetRef.Kind, ma.Spec.ScaleTargetRef.Name)
	return HandoverResult{Replicas: replicas, Notes: notes}, nil
}

// writeStatus writes the starting status from hpa's status, the target's
// size now and the HPA's rescale events.
func (h *Handover) writeStatus(ctx context.Context, ma *v1alpha1.MetricAutoscaler, hpa *autoscalingv2.HorizontalPodAutoscaler) (int32, []string, error) {
	ref := ma.Namespace + "/" + ma.Name
	replicas, err := h.targetReplicas(ctx, ma)
	if err != nil {
		return 0, nil, err
	}
	seed := Seed{HPA: hpa, Replicas: replicas, Now: h.Clock.Now()}
	if hpa.Spec.Behavior != nil {
		seed.Rescales, seed.RescalesRead = h.rescales(ctx, hpa)
	}
	status, notes := StartingStatus(ma.Spec, seed)
	ma = ma.DeepCopy()
	ma.Status = status
	u, err := toUnstructured(ma)
	if err != nil {
		return 0, nil, err
	}
	if _, err := h.mas(ma.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return 0, nil, fmt.Errorf("writing the starting status of MetricAutoscaler %s: %w", ref, err)
	}
	h.logf("metricautoscaler %s: starting status written: %d replicas, lastScaleTime %s, %d scale event(s)", ref, replicas,
		fmtTime(status.LastScaleTime), len(status.History.ScaleUpEvents)+len(status.History.ScaleDownEvents))
	return replicas, notes, nil
}

func fmtTime(t *metav1.Time) string {
	if t == nil {
		return "none"
	}
	return t.UTC().Format(time.RFC3339)
}

// rescales reads the HPA's SuccessfulRescale events; false when they cannot
// be read (no RBAC to list events, say).
func (h *Handover) rescales(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler) ([]Rescale, bool) {
	sel := fields.Set{"involvedObject.uid": string(hpa.UID), "reason": "SuccessfulRescale"}.AsSelector().String()
	list, err := h.Kube.CoreV1().Events(hpa.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		h.logf("horizontalpodautoscaler %s/%s: its events could not be read (%v): no scale events in the starting history", hpa.Namespace, hpa.Name, err)
		return nil, false
	}
	var mine []corev1.Event
	for _, e := range list.Items {
		// also filtered here: not every server (or fake) applies field selectors
		if e.InvolvedObject.UID == hpa.UID {
			mine = append(mine, e)
		}
	}
	return RescalesFromEvents(mine), true
}

// targetReplicas reads the target's /scale spec.replicas.
func (h *Handover) targetReplicas(ctx context.Context, ma *v1alpha1.MetricAutoscaler) (int32, error) {
	ref := ma.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return 0, fmt.Errorf("MetricAutoscaler %s/%s: spec.scaleTargetRef.apiVersion: %w", ma.Namespace, ma.Name, err)
	}
	mappings, err := h.Mapper.RESTMappings(schema.GroupKind{Group: gv.Group, Kind: ref.Kind})
	if err != nil {
		return 0, fmt.Errorf("the scale target %s %s of MetricAutoscaler %s/%s: %w", ref.Kind, ref.Name, ma.Namespace, ma.Name, err)
	}
	var errs []error
	for _, m := range mappings {
		sc, err := h.Scales.Scales(ma.Namespace).Get(ctx, m.Resource.GroupResource(), ref.Name, metav1.GetOptions{})
		if err == nil {
			return sc.Spec.Replicas, nil
		}
		errs = append(errs, err)
	}
	return 0, fmt.Errorf("reading the scale of %s %s/%s: %w", ref.Kind, ma.Namespace, ref.Name, errors.Join(errs...))
}

// waitGone waits until the HPA of that UID is gone.
func (h *Handover) waitGone(ctx context.Context, ns, name string, uid types.UID) error {
	timeout := h.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	var last *autoscalingv2.HorizontalPodAutoscaler
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := h.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		last = got
		return got.UID != uid, nil
	})
	if err != nil {
		why := ""
		if last != nil && len(last.Finalizers) > 0 {
			why = fmt.Sprintf(" (finalizers %v)", last.Finalizers)
		}
		return fmt.Errorf("HorizontalPodAutoscaler %s/%s is still there%s: %w; the MetricAutoscaler stays paused: run again once it is gone", ns, name, why, err)
	}
	return nil
}

// checkNoOtherAutoscaler refuses a handover when another MetricAutoscaler
// scales the HPA's target: the two would fight.
func (h *Handover) checkNoOtherAutoscaler(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	list, err := h.mas(hpa.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing MetricAutoscalers in %s: %w", hpa.Namespace, err)
	}
	for i := range list.Items {
		other, err := fromUnstructured(&list.Items[i])
		if err != nil {
			return err
		}
		if other.Name != hpa.Name && sameTarget(other.Spec.ScaleTargetRef, hpa.Spec.ScaleTargetRef) {
			return fmt.Errorf("MetricAutoscaler %s/%s already scales %s %s: refusing to hand HorizontalPodAutoscaler %s over to a second autoscaler of it",
				other.Namespace, other.Name, other.Spec.ScaleTargetRef.Kind, other.Spec.ScaleTargetRef.Name, hpa.Name)
		}
	}
	return nil
}

func sameTarget(a, b autoscalingv2.CrossVersionObjectReference) bool {
	ga, _ := schema.ParseGroupVersion(a.APIVersion)
	gb, _ := schema.ParseGroupVersion(b.APIVersion)
	return a.Kind == b.Kind && a.Name == b.Name && ga.Group == gb.Group
}

func (h *Handover) getMA(ctx context.Context, ns, name string) (*v1alpha1.MetricAutoscaler, error) {
	u, err := h.mas(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("reading MetricAutoscaler %s/%s: %w", ns, name, err)
	}
	return fromUnstructured(u)
}

func (h *Handover) createMA(ctx context.Context, ma *v1alpha1.MetricAutoscaler) (*v1alpha1.MetricAutoscaler, error) {
	u, err := toUnstructured(ma)
	if err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(u.Object, "status")
	created, err := h.mas(ma.Namespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating MetricAutoscaler %s/%s: %w", ma.Namespace, ma.Name, err)
	}
	return fromUnstructured(created)
}

func (h *Handover) updateMA(ctx context.Context, ma *v1alpha1.MetricAutoscaler) (*v1alpha1.MetricAutoscaler, error) {
	u, err := toUnstructured(ma)
	if err != nil {
		return nil, err
	}
	updated, err := h.mas(ma.Namespace).Update(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("updating MetricAutoscaler %s/%s: %w", ma.Namespace, ma.Name, err)
	}
	return fromUnstructured(updated)
}

func toUnstructured(ma *v1alpha1.MetricAutoscaler) (*unstructured.Unstructured, error) {
	ma = ma.DeepCopy()
	ma.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("MetricAutoscaler"))
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ma)
	if err != nil {
		return nil, fmt.Errorf("encoding MetricAutoscaler %s/%s: %w", ma.Namespace, ma.Name, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func fromUnstructured(u *unstructured.Unstructured) (*v1alpha1.MetricAutoscaler, error) {
	ma := &v1alpha1.MetricAutoscaler{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ma); err != nil {
		return nil, fmt.Errorf("decoding MetricAutoscaler %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return ma, nil
}
