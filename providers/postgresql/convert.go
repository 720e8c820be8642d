package postgresql

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/metricscale/metricscale/providers/ondemand"
)

// querier is the seam between the provider and the server: it runs one
// metric's query in a read-only transaction with a statement timeout and
// returns the rows in PostgreSQL's text format.
type querier interface {
	query(ctx context.Context, sql string) (*result, error)
}

// result is a query's answer; a nil cell is NULL.
type result struct {
	columns []column
	rows    [][]*string
}

type column struct {
	name     string
	typeOID  uint32
	typeName string
}

// The numeric types a value column may have (PostgreSQL's built-in OIDs).
// Anything else (text, money, a domain) must be cast in the query, so a
// number is never guessed from a label-like string.
var numericOIDs = map[uint32]string{
	20:   "bigint",
	21:   "smallint",
	23:   "integer",
	700:  "real",
	701:  "double precision",
	1700: "numeric",
}

// maxRows bounds one reading, like the answer size of ondemand.
const maxRows = ondemand.DefaultMaxItems

// maxResultBytes bounds the text of one reading's cells (labels and
// values): 10,000 rows of 400 bytes. Unbounded, 9,999 rows of 20 KB of
// labels cost gigabytes once copied, keyed and served.
const maxResultBytes = 4 << 20

// toSeries turns rows into series: every column but the value column is a
// label (NULL: the label is left out), the value column is the value.
func toSeries(m *metricSpec, res *result) ([]ondemand.Series, error) {
	valueAt := -1
	seen := map[string]bool{}
	var names []string
	for i, c := range res.columns {
		names = append(names, c.name)
		if seen[c.name] {
			return nil, fmt.Errorf("column %q appears twice in the result: alias one of them", c.name)
		}
		seen[c.name] = true
		if c.name == m.valueColumn {
			valueAt = i
			continue
		}
		if msgs := validation.IsQualifiedName(c.name); len(msgs) > 0 {
			return nil, fmt.Errorf("column %d, %q, cannot be a label name (%s): alias it (AS queue)", i+1, c.name, strings.Join(msgs, "; "))
		}
	}
	if valueAt < 0 {
		return nil, fmt.Errorf("the result has no value column %q (columns: %s)", m.valueColumn, strings.Join(names, ", "))
	}
	vc := res.columns[valueAt]
	if _, ok := numericOIDs[vc.typeOID]; !ok {
		return nil, fmt.Errorf("value column %q is of type %s, not a number: cast it (::bigint, ::numeric)", vc.name, typeName(vc))
	}
	if len(res.rows) > maxRows {
		return nil, fmt.Errorf("the query returned %d rows, more than %d", len(res.rows), maxRows)
	}
	if len(res.rows) == 0 {
		if m.emptyAs != nil {
			return []ondemand.Series{{Labels: map[string]string{}, Value: *m.emptyAs}}, nil
		}
		return nil, nil
	}
	out := make([]ondemand.Series, 0, len(res.rows))
	rowOf := map[string]int{}
	for r, row := range res.rows {
		if len(row) != len(res.columns) {
			return nil, fmt.Errorf("row %d has %d cells for %d columns", r+1, len(row), len(res.columns))
		}
		lbls := map[string]string{}
		for i, cell := range row {
			if i != valueAt && cell != nil {
				lbls[res.columns[i].name] = *cell
			}
		}
		key := labelKey(lbls)
		var v float64
		switch cell := row[valueAt]; {
		case cell == nil && m.nullAs != nil:
			v = *m.nullAs
		case cell == nil:
			return nil, fmt.Errorf("row %d %s: the value column %q is NULL; coalesce it in the query or set nullAs", r+1, key, vc.name)
		default:
			f, err := strconv.ParseFloat(*cell, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("row %d %s: the value column %q holds %q, not a finite number", r+1, key, vc.name, *cell)
			}
			v = f
		}
		if prev, dup := rowOf[key]; dup {
			return nil, fmt.Errorf("rows %d and %d have the same labels %s: each row must be one series (GROUP BY the label columns)", prev+1, r+1, key)
		}
		rowOf[key] = r
		out = append(out, ondemand.Series{Labels: lbls, Value: v})
	}
	return out, nil
}

func typeName(c column) string {
	if c.typeName != "" {
		return c.typeName
	}
	return fmt.Sprintf("oid %d", c.typeOID)
}

// labelKey is {a="x",b="y"}, sorted: it names a row in errors and tells
// duplicates apart.
func labelKey(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, l[k])
	}
	b.WriteByte('}')
	return b.String()
}
