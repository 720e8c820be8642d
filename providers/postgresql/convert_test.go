package postgresql

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/providers"
)

func str(s string) *string { return &s }

func num(f float64) *float64 { return &f }

var (
	textCol   = func(n string) column { return column{name: n, typeOID: 25, typeName: "text"} }
	bigintCol = func(n string) column { return column{name: n, typeOID: 20, typeName: "int8"} }
)

func TestToSeries(t *testing.T) {
	t.Parallel()
	queueValue := []column{textCol("queue"), bigintCol("value")}
	for _, tc := range []struct {
		name    string
		spec    metricSpec
		res     result
		want    string // labelKey=value lines, sorted as read
		wantErr string
	}{
		{
			name: "rows are series",
			res:  result{columns: queueValue, rows: [][]*string{{str("a"), str("3")}, {str("b"), str("0")}}},
			want: `{queue="a"}=3 {queue="b"}=0`,
		},
		{
			name: "every numeric type",
			res: result{
				columns: []column{textCol("t"), {name: "value", typeOID: 1700, typeName: "numeric"}},
				rows:    [][]*string{{str("n"), str("2.50")}, {str("e"), str("-1e3")}},
			},
			want: `{t="n"}=2.5 {t="e"}=-1000`,
		},
		{
			name: "a NULL label is left out",
			res:  result{columns: []column{textCol("queue"), textCol("shard"), bigintCol("value")}, rows: [][]*string{{str("a"), nil, str("1")}, {str("a"), str("2"), str("5")}}},
			want: `{queue="a"}=1 {queue="a",shard="2"}=5`,
		},
		{
			name: "a custom value column; labels of any type as text",
			spec: metricSpec{valueColumn: "n"},
			res:  result{columns: []column{bigintCol("n"), {name: "since", typeOID: 1184, typeName: "timestamptz"}}, rows: [][]*string{{str("7"), str("2024-01-01 00:00:00+00")}}},
			want: `{since="2024-01-01 00:00:00+00"}=7`,
		},
		{
			name:    "NULL value fails, naming the row",
			res:     result{columns: queueValue, rows: [][]*string{{str("a"), str("1")}, {str("b"), nil}}},
			wantErr: `row 2 {queue="b"}: the value column "value" is NULL; coalesce it in the query or set nullAs`,
		},
		{
			name: "NULL value with nullAs",
			spec: metricSpec{nullAs: num(0)},
			res:  result{columns: queueValue, rows: [][]*string{{str("b"), nil}}},
			want: `{queue="b"}=0`,
		},
		{
			name: "no row is an empty reading",
			res:  result{columns: queueValue},
			want: ``,
		},
		{
			name: "no row with emptyAs is one series without labels",
			spec: metricSpec{emptyAs: num(0)},
			res:  result{columns: queueValue},
			want: `{}=0`,
		},
		{
			name:    "duplicate label sets",
			res:     result{columns: queueValue, rows: [][]*string{{str("a"), str("1")}, {str("b"), str("1")}, {str("a"), str("2")}}},
			wantErr: `rows 1 and 3 have the same labels {queue="a"}`,
		},
		{
			name:    "two rows without labels are duplicates too",
			res:     result{columns: []column{bigintCol("value")}, rows: [][]*string{{str("1")}, {str("2")}}},
			wantErr: `rows 1 and 2 have the same labels {}`,
		},
		{
			name:    "a text value column",
			res:     result{columns: []column{textCol("queue"), textCol("value")}, rows: [][]*string{{str("a"), str("12")}}},
			wantErr: `value column "value" is of type text, not a number`,
		},
		{
			name:    "NaN",
			res:     result{columns: []column{{name: "value", typeOID: 701, typeName: "float8"}}, rows: [][]*string{{str("NaN")}}},
			wantErr: `holds "NaN", not a finite number`,
		},
		{
			name:    "Infinity",
			res:     result{columns: []column{{name: "value", typeOID: 701}}, rows: [][]*string{{str("Infinity")}}},
			wantErr: `holds "Infinity"`,
		},
		{
			name:    "no value column",
			res:     result{columns: []column{textCol("queue"), bigintCol("count")}, rows: [][]*string{{str("a"), str("1")}}},
			wantErr: `the result has no value column "value" (columns: queue, count)`,
		},
		{
			name:    "an unnamed label column",
			res:     result{columns: []column{textCol("?column?"), bigintCol("value")}},
			wantErr: `column 1, "?column?", cannot be a label name`,
		},
		{
			name:    "a column twice",
			res:     result{columns: []column{textCol("q"), textCol("q"), bigintCol("value")}},
			wantErr: `column "q" appears twice`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := tc.spec
			if spec.valueColumn == "" {
				spec.valueColumn = "value"
			}
			series, err := toSeries(&spec, &tc.res)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %s", err, tc.wantErr)
				}
				if series != nil {
					t.Errorf("series %v came back with the error", series)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range series {
				got = append(got, labelKey(s.Labels)+"="+strconv.FormatFloat(s.Value, 'g', -1, 64))
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("got %q, want %q", g, tc.want)
			}
		})
	}
}

// fakeQuerier answers queries from a table; a query it does not know is
// an error, as a missing table would be.
type fakeQuerier struct {
	answer func(ctx context.Context, sql string) (*result, error)
}

func (f *fakeQuerier) query(ctx context.Context, sql string) (*result, error) {
	return f.answer(ctx, sql)
}

// TestThroughProvider checks what a query gets for each answer: the
// 404, 503 and values the README promises.
func TestThroughProvider(t *testing.T) {
	t.Parallel()
	answers := map[string]result{
		"SELECT queue, value FROM ok":   {columns: []column{textCol("queue"), bigintCol("value")}, rows: [][]*string{{str("a"), str("4")}}},
		"SELECT queue, value FROM none": {columns: []column{textCol("queue"), bigintCol("value")}},
		"SELECT queue, value FROM null": {columns: []column{textCol("queue"), bigintCol("value")}, rows: [][]*string{{str("a"), nil}}},
	}
	q := &fakeQuerier{answer: func(_ context.Context, sql string) (*result, error) {
		r, ok := answers[sql]
		if !ok {
			return nil, errors.New("relation does not exist")
		}
		return &r, nil
	}}
	raw := opts("",
		`{"name": "postgresql_ok", "query": "SELECT queue, value FROM ok"}`,
		`{"name": "postgresql_none", "query": "SELECT queue, value FROM none"}`,
		`{"name": "postgresql_none_as_zero", "query": "SELECT queue, value FROM none", "emptyAs": 0, "namespace": "team-a"}`,
		`{"name": "postgresql_null", "query": "SELECT queue, value FROM null"}`,
		`{"name": "postgresql_null_as", "query": "SELECT queue, value FROM null", "nullAs": -1, "allowNegative": true}`,
		`{"name": "postgresql_negative", "query": "SELECT queue, value FROM null", "nullAs": -1}`,
		`{"name": "postgresql_missing", "query": "SELECT queue, value FROM missing"}`,
	)
	s, err := decodeOptions("options", json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	p, err := newProvider("pg", s, providers.Deps{Clock: clocktesting.NewFakePassiveClock(testNow)}, q)
	if err != nil {
		t.Fatal(err)
	}
	get := func(ns, metric string) (string, int, string) {
		list, err := p.GetExternalMetric(context.Background(), ns, labels.Everything(), providers.ExternalMetricInfo{Metric: metric})
		if err != nil {
			code, msg := 0, err.Error()
			var pe *providers.Error
			if errors.As(err, &pe) {
				code = pe.Code()
			}
			return "", code, msg
		}
		var got []string
		for _, it := range list.Items {
			got = append(got, labelKey(it.MetricLabels)+"="+it.Value.String())
		}
		return strings.Join(got, " "), http.StatusOK, ""
	}
	for _, tc := range []struct {
		ns, metric, want string
		code             int
		msg              string
	}{
		{"default", "postgresql_ok", `{queue="a"}=4`, 200, ""},
		{"default", "postgresql_none", "", 404, "could not find the metric postgresql_none"},
		{"team-a", "postgresql_none_as_zero", `{namespace="team-a"}=0`, 200, ""},
		{"team-b", "postgresql_none_as_zero", "", 404, "postgresql_none_as_zero"},
		{"default", "postgresql_null", "", 503, `metrics provider "pg" is unavailable: reading postgresql_null: row 1 {queue="a"}: the value column "value" is NULL`},
		{"default", "postgresql_null_as", `{queue="a"}=-1`, 200, ""},
		// a negative value without allowNegative: a 503 naming the series
		{"default", "postgresql_negative", "", 503, `metrics provider "pg" answered -1 for metric postgresql_negative series queue=a: refused, it is negative`},
		{"default", "postgresql_missing", "", 503, `metrics provider "pg" is unavailable: reading postgresql_missing: relation does not exist`},
	} {
		got, code, msg := get(tc.ns, tc.metric)
		if got != tc.want || code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s in %s: got %q, code %d, %q; want %q, code %d, %q", tc.metric, tc.ns, got, code, msg, tc.want, tc.code, tc.msg)
		}
	}
	if list := p.ListAllExternalMetrics(); len(list) != 7 {
		t.Errorf("discovery lists %d metrics, want 7: %v", len(list), list)
	}
}
