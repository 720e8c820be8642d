package decision

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/autoscaler/arith"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
	"github.com/metricscale/metricscale/autoscaler/replicas"
)

// Reasons of the ScalingActive condition and events a formula reports.
const (
	ReasonInvalidFormula = "InvalidFormula"
	ReasonFailedFormula  = "FailedEvaluateFormula"
)

// formulaInputs maps the index of each spec metric spec.formula takes to
// its name in the expression. Bindings to no External or Object metric are
// left out (the CRD and the compiler refuse them): that metric keeps
// proposing, and the formula fails to compile.
func (p *Plan) formulaInputs(in Input) map[int]string {
	if in.Formula == nil {
		return nil
	}
	specs := p.hpa.Spec.Metrics
	out := make(map[int]string, len(in.Formula.Inputs))
	for _, b := range in.Formula.Inputs {
		i := int(b.Metric)
		if i < 0 || i >= len(specs) {
			continue
		}
		if t := specs[i].Type; t != autoscalingv2.ExternalMetricSourceType && t != autoscalingv2.ObjectMetricSourceType {
			continue
		}
		out[i] = b.Name
	}
	return out
}

// readInput reads a formula input's value as the metric has it: the summed
// series of an External metric, the object's value of an Object metric.
// It fills the metric's status with that value, and returns the event
// reason to report when the read fails.
func (p *Plan) readInput(ctx context.Context, in Input, ns string, spec *autoscalingv2.MetricSpec, status *autoscalingv2.MetricStatus) (float64, string, error) {
	switch {
	case spec.Type == autoscalingv2.ExternalMetricSourceType && spec.External != nil:
		const reason = "FailedGetExternalMetric"
		src := spec.External
		sel, err := metav1.LabelSelectorAsSelector(src.Metric.Selector)
		if err != nil {
			return 0, reason, fmt.Errorf("failed to get %s external metric value: %w", src.Metric.Name, err)
		}
		values, _, err := in.Metrics.ExternalMetric(ctx, src.Metric.Name, ns, sel)
		if err != nil {
			return 0, reason, fmt.Errorf("failed to get %s external metric value: unable to get external metric %s/%s/%+v: %w", src.Metric.Name, ns, src.Metric.Name, src.Metric.Selector, err)
		}
		sum := saturatingSum(values)
		*status = autoscalingv2.MetricStatus{Type: spec.Type, External: &autoscalingv2.ExternalMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: src.Metric.Name, Selector: src.Metric.Selector},
			Current: autoscalingv2.MetricValueStatus{Value: resource.NewMilliQuantity(sum, resource.DecimalSI)},
		}}
		return float64(sum) / 1000, "", nil
	case spec.Type == autoscalingv2.ObjectMetricSourceType && spec.Object != nil:
		const reason = "FailedGetObjectMetric"
		src := spec.Object
		sel, err := metav1.LabelSelectorAsSelector(src.Metric.Selector)
		if err != nil {
			return 0, reason, fmt.Errorf("failed to get object metric value: %w", err)
		}
		v, _, err := in.Metrics.ObjectMetric(ctx, src.Metric.Name, ns, &src.DescribedObject, sel)
		if err != nil {
			return 0, reason, fmt.Errorf("failed to get object metric value: unable to get metric %s: %w on %s %s/%s", src.Metric.Name, err, src.DescribedObject.Kind, ns, src.DescribedObject.Name)
		}
		*status = autoscalingv2.MetricStatus{Type: spec.Type, Object: &autoscalingv2.ObjectMetricStatus{
			DescribedObject: src.DescribedObject,
			Metric:          autoscalingv2.MetricIdentifier{Name: src.Metric.Name, Selector: src.Metric.Selector},
			Current:         autoscalingv2.MetricValueStatus{Value: resource.NewMilliQuantity(v, resource.DecimalSI)},
		}}
		return float64(v) / 1000, "", nil
	}
	return 0, "InvalidMetricSourceType", fmt.Errorf("a formula input must be an External or Object metric, not %q", spec.Type)
}

// computeFormula proposes a count for spec.formula from its inputs' values,
// as the HPA would for an External metric of one series whose value is the
// expression's, and fills the formula's status entry. inputErr is the
// first input that could not be read: the formula fails with it.
func (p *Plan) computeFormula(ctx context.Context, calc *replicas.Calculator, in Input, values map[string]float64, inputErr error, scale Scale, tol replicas.Tolerances, status *autoscalingv2.MetricStatus) (int32, string, string, error) {
	f := in.Formula
	name := "formula " + f.Name
	switch {
	case in.FormulaProgram == nil:
		err := in.FormulaErr
		if err == nil {
			err = errors.New("not compiled")
		}
		return 0, name, ReasonInvalidFormula, fmt.Errorf("invalid formula %s: %w", f.Name, err)
	case inputErr != nil:
		return 0, name, ReasonFailedFormula, fmt.Errorf("failed to evaluate formula %s: %w", f.Name, inputErr)
	}
	v, err := in.FormulaProgram.Eval(values)
	if err != nil {
		return 0, name, ReasonFailedFormula, fmt.Errorf("failed to evaluate %w", err)
	}
	p.formulaValue = v
	milli := int64(math.MaxInt64)
	if m := math.Round(v * 1000); m < math.MaxInt64 {
		milli = int64(m)
	}
	saved := calc.Source
	calc.Source = composite{name: f.Name, value: milli}
	defer func() { calc.Source = saved }()

	st := autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
		Metric: autoscalingv2.MetricIdentifier{Name: f.Name},
	}}
	var proposal int32
	var usage int64
	switch {
	case f.Target.Type == autoscalingv2.AverageValueMetricType && f.Target.AverageValue != nil:
		proposal, usage, err = calc.ExternalAverageValue(ctx, scale.StatusReplicas, arith.MilliValue(*f.Target.AverageValue, p.upstream), f.Name, tol, nil)
		if err == nil && p.averageDefined(scale) {
			st.External.Current.AverageValue = resource.NewMilliQuantity(usage, resource.DecimalSI)
		}
	case f.Target.Type == autoscalingv2.ValueMetricType && f.Target.Value != nil:
		proposal, usage, err = calc.ExternalValue(ctx, scale.Replicas, arith.MilliValue(*f.Target.Value, p.upstream), f.Name, tol, nil)
		st.External.Current.Value = resource.NewMilliQuantity(usage, resource.DecimalSI)
	default:
		return 0, name, ReasonInvalidFormula, fmt.Errorf("invalid formula %s: target must be of type Value or AverageValue with its value set", f.Name)
	}
	if err != nil {
		return 0, name, ReasonFailedFormula, fmt.Errorf("failed to evaluate formula %s: %w", f.Name, err)
	}
	*status = st
	return proposal, name, "", nil
}

// composite is a metrics source that answers the formula's External query
// with its one value.
type composite struct {
	metricsource.Source
	name  string
	value int64
}

func (c composite) ExternalMetric(_ context.Context, name, _ string, _ labels.Selector) ([]int64, time.Time, error) {
	if name != c.name {
		return nil, time.Time{}, fmt.Errorf("formula source asked for %q", name)
	}
	return []int64{c.value}, time.Time{}, nil
}
