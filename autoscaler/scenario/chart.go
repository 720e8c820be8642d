package scenario

import (
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/metricscale/metricscale/autoscaler/metrictarget"
	"github.com/metricscale/metricscale/autoscaler/plot"
)

// Chart is the replay's timeline: replicas and desired replicas, then one
// panel per metric with its value against its target.
func Chart(title string, results []StepResult) plot.Chart {
	if len(results) == 0 {
		return plot.Chart{Title: title}
	}
	start := results[0].Time
	at := func(r StepResult) time.Duration { return r.Time.Sub(start) }
	replicas := plot.Series{Name: "replicas", Step: true}
	desired := plot.Series{Name: "desired", Step: true, Dashed: true}
	for _, r := range results {
		replicas.Points = append(replicas.Points, plot.Point{At: at(r), Value: float64(r.Replicas)})
		desired.Points = append(desired.Points, plot.Point{At: at(r), Value: float64(r.Status.DesiredReplicas)})
	}
	c := plot.Chart{Title: title, Panels: []plot.Panel{{Title: "Replicas", Series: []plot.Series{replicas, desired}}}}

	specs := results[len(results)-1].Spec
	for i, spec := range specs {
		current := plot.Series{Name: "current"}
		target := plot.Series{Name: "target", Step: true, Dashed: true}
		for _, r := range results {
			if i >= len(r.Spec) {
				continue
			}
			var st *autoscalingv2.MetricStatus
			if i < len(r.Status.CurrentMetrics) {
				st = &r.Status.CurrentMetrics[i]
			}
			pair, _ := metrictarget.Of(r.Spec[i], st)
			cur, tgt, ok := pair.Values()
			target.Points = append(target.Points, plot.Point{At: at(r), Value: tgt})
			if ok {
				current.Points = append(current.Points, plot.Point{At: at(r), Value: cur})
			}
		}
		c.Panels = append(c.Panels, plot.Panel{Title: metricTitle(spec), Series: []plot.Series{current, target}})
	}
	return c
}

func metricTitle(spec autoscalingv2.MetricSpec) string {
	p, _ := metrictarget.Of(spec, nil)
	return fmt.Sprintf("%s (%s)", p.Name, spec.Type)
}
