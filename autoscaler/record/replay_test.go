package record_test

import (
	"context"

	"github.com/metricscale/metricscale/autoscaler/record"
	"github.com/metricscale/metricscale/autoscaler/replay"
)

// The recorder's tests replay what they record; replay imports record, so
// it is given to them from this external test package.
func init() {
	record.ReplayCheck = func(ctx context.Context, rec *record.Recording) ([]byte, []string, error) {
		data, err := replay.YAML(rec)
		if err != nil {
			return nil, nil, err
		}
		diffs, err := replay.Check(ctx, rec, data)
		return data, diffs, err
	}
}
