package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/formula"
)

// formulas keeps each MetricAutoscaler's compiled spec.formula for its
// generation: building a CEL environment costs far more than a reconcile's
// arithmetic, and the spec only changes with the generation.
type formulas struct {
	mu    sync.Mutex
	byKey map[string]compiledFormula
}

type compiledFormula struct {
	uid        types.UID
	generation int64
	program    *formula.Program
	err        error
}

// compile returns ma's compiled formula, or why it does not compile (the
// metric the formula is then fails, as InvalidFormula); nil, nil without
// one.
func (f *formulas) compile(ma *v1alpha1.MetricAutoscaler) (*formula.Program, error) {
	if ma.Spec.Formula == nil {
		f.forget(ma.Namespace + "/" + ma.Name)
		return nil, nil
	}
	key := ma.Namespace + "/" + ma.Name
	f.mu.Lock()
	c, ok := f.byKey[key]
	f.mu.Unlock()
	if ok && c.uid == ma.UID && c.generation == ma.Generation && ma.Generation != 0 {
		return c.program, c.err
	}
	program, errs := formula.Compile(ma.Spec.Formula, ma.Spec.Metrics, field.NewPath("spec"))
	c = compiledFormula{uid: ma.UID, generation: ma.Generation, program: program, err: errs.ToAggregate()}
	f.mu.Lock()
	if f.byKey == nil {
		f.byKey = map[string]compiledFormula{}
	}
	f.byKey[key] = c
	f.mu.Unlock()
	return c.program, c.err
}

// forget drops a deleted object's entry (key is namespace/name).
func (f *formulas) forget(key string) {
	f.mu.Lock()
	delete(f.byKey, key)
	f.mu.Unlock()
}
