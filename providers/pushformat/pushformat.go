// Package pushformat parses the two body formats of the push API into
// samples.
//
// Prometheus text exposition format (Content-Type text/plain), one series per
// line, any number of lines:
//
//	# HELP and # TYPE lines and other comments are ignored
//	queue_depth{namespace="default",queue="orders"} 12.5
//	queue_depth{namespace="default",queue="billing"} 3 1767225600000
//
// The optional trailing number is the sample time in milliseconds since the
// Unix epoch; without it the sample is timestamped when received. Sample
// times must be after the epoch and no later than 2262-04-11 (what
// time.Time.UnixNano represents); others are refused.
//
// JSON (Content-Type application/json):
//
//	{"series": [
//	  {"name": "queue_depth", "labels": {"namespace": "default", "queue": "orders"},
//	   "value": 12.5, "timestamp": "2026-01-01T00:00:00Z"}
//	]}
//
// "labels" and "timestamp" (RFC 3339) are optional; unknown fields are
// refused. Field names are case-sensitive ("Value" is an unknown field, not
// "value") and a key may appear once per object (labels included): unlike
// encoding/json's defaults, nothing is taken silently. In both formats metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label
// names [a-zA-Z_][a-zA-Z0-9_]* (not starting with "__"), label values are
// UTF-8, and values must be finite: NaN and infinities are refused, since an
// autoscaler cannot act on them. A value's milli-value must also fit an
// int64 (|value| < 9.223372036854775e15): the HPA reads values with
// Quantity.MilliValue(), which would wrap a larger one.
package pushformat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/metricscale/metricscale/providers"
)

// Limits on one series.
const (
	MaxNameLen        = 256
	MaxLabels         = 32
	MaxLabelValueLen  = 1024
	MaxSamplesPerPush = 100_000
)

// ValidMetricName reports whether s is a valid metric name.
func ValidMetricName(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlpha(c) || c == '_' || c == ':' || (i > 0 && isDigit(c)) {
			continue
		}
		return false
	}
	return true
}

// ValidLabelName reports whether s is a valid label name.
func ValidLabelName(s string) bool {
	if s == "" || len(s) > MaxNameLen || strings.HasPrefix(s, "__") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlpha(c) || c == '_' || (i > 0 && isDigit(c)) {
			continue
		}
		return false
	}
	return true
}

func isAlpha(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func checkLabels(lbls map[string]string) error {
	if len(lbls) > MaxLabels {
		return fmt.Errorf("%d labels, more than %d", len(lbls), MaxLabels)
	}
	for k, v := range lbls {
		if !ValidLabelName(k) {
			return fmt.Errorf("invalid label name %q", k)
		}
		if len(v) > MaxLabelValueLen {
			return fmt.Errorf("label %s: value longer than %d bytes", k, MaxLabelValueLen)
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("label %s: value is not valid UTF-8", k)
		}
	}
	return nil
}

// maxMilli is 2^63, the first milli-value an int64 cannot hold.
const maxMilli = float64(1 << 63)

// The range of sample times: after the Unix epoch and within what
// time.Time.UnixNano represents (up to 2262-04-11T23:47:16.854775807Z).
// Outside it UnixNano wraps around (1615 became 2200).
var (
	MinTime = time.Unix(0, 1)
	MaxTime = time.Unix(0, math.MaxInt64)
)

// TimeInRange reports whether t is within [MinTime, MaxTime].
func TimeInRange(t time.Time) bool { return !t.Before(MinTime) && !t.After(MaxTime) }

// ValueFits reports whether v is finite and its milli-value (v*1000, the
// precision the HPA works in through Quantity.MilliValue) fits an int64:
// |v| < 9.223372036854775e15. A larger value would wrap in the HPA.
func ValueFits(v float64) bool {
	return !math.IsNaN(v) && math.Abs(math.Round(v*1000)) < maxMilli
}

func checkValue(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("value %v is not finite", v)
	}
	if !ValueFits(v) {
		return fmt.Errorf("value %v is out of range: its milli-value must fit an int64 (|value| < 9.223372036854775e15)", v)
	}
	return nil
}

// ParseText parses the Prometheus text exposition format.
func ParseText(data []byte) ([]providers.Sample, error) {
	return parseExposition(data, false)
}

// ParseOpenMetrics parses the OpenMetrics text format (Content-Type
// application/openmetrics-text): as ParseText, except that timestamps are
// seconds since the epoch, possibly fractional ("1767225600.25"), exemplars
// ("# {trace_id=...} 1 ts" after the value) are ignored, and the body must
// end with a "# EOF" line, after which nothing but blank lines may follow.
func ParseOpenMetrics(data []byte) ([]providers.Sample, error) {
	return parseExposition(data, true)
}

func parseExposition(data []byte, om bool) ([]providers.Sample, error) {
	var out []providers.Sample
	lineNo := 0
	eof := false
	for len(data) > 0 {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		line = bytes.TrimLeft(line, " \t")
		if om && eof && len(line) > 0 {
			return nil, fmt.Errorf("line %d: data after # EOF", lineNo)
		}
		if om && string(line) == "# EOF" {
			eof = true
			continue
		}
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		s, err := parseLine(string(line), om)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		if len(out) == MaxSamplesPerPush {
			return nil, fmt.Errorf("line %d: more than %d samples in one push", lineNo, MaxSamplesPerPush)
		}
		out = append(out, s)
	}
	if om && !eof {
		return nil, errors.New("OpenMetrics body does not end with a # EOF line")
	}
	return out, nil
}

// maxUnixSeconds is the last second time.Time.UnixNano represents.
const maxUnixSeconds = math.MaxInt64 / int64(time.Second)

// parseSeconds parses an OpenMetrics timestamp: seconds since the epoch,
// possibly fractional, within the range UnixNano represents.
func parseSeconds(name, f string) (time.Time, error) {
	sec, err := strconv.ParseFloat(f, 64)
	if err != nil || math.IsNaN(sec) || math.IsInf(sec, 0) {
		return time.Time{}, fmt.Errorf("metric %s: invalid timestamp %q (seconds since the epoch)", name, f)
	}
	if sec <= 0 || sec > float64(maxUnixSeconds) {
		return time.Time{}, fmt.Errorf("metric %s: timestamp %s out of range (seconds after the epoch, at most %d)", name, f, maxUnixSeconds)
	}
	whole, frac := math.Modf(sec)
	t := time.Unix(int64(whole), int64(math.Round(frac*1e9)))
	if !TimeInRange(t) {
		return time.Time{}, fmt.Errorf("metric %s: timestamp %s out of range (seconds after the epoch, at most %d)", name, f, maxUnixSeconds)
	}
	return t, nil
}

type lexer struct {
	s   string
	pos int
}

func (l *lexer) skipSpace() {
	for l.pos < len(l.s) && (l.s[l.pos] == ' ' || l.s[l.pos] == '\t') {
		l.pos++
	}
}

func (l *lexer) ident(first func(byte) bool, rest func(byte) bool) string {
	start := l.pos
	if l.pos < len(l.s) && first(l.s[l.pos]) {
		l.pos++
		for l.pos < len(l.s) && rest(l.s[l.pos]) {
			l.pos++
		}
	}
	return l.s[start:l.pos]
}

func (l *lexer) field() string {
	start := l.pos
	for l.pos < len(l.s) && l.s[l.pos] != ' ' && l.s[l.pos] != '\t' {
		l.pos++
	}
	return l.s[start:l.pos]
}

func metricFirst(c byte) bool { return isAlpha(c) || c == '_' || c == ':' }
func metricRest(c byte) bool  { return metricFirst(c) || isDigit(c) }
func labelFirst(c byte) bool  { return isAlpha(c) || c == '_' }
func labelRest(c byte) bool   { return labelFirst(c) || isDigit(c) }

func parseLine(line string, om bool) (providers.Sample, error) {
	var s providers.Sample
	l := &lexer{s: line}
	s.Name = l.ident(metricFirst, metricRest)
	if s.Name == "" {
		return s, fmt.Errorf("expected a metric name at column %d", l.pos+1)
	}
	if len(s.Name) > MaxNameLen {
		return s, fmt.Errorf("metric name longer than %d bytes", MaxNameLen)
	}
	l.skipSpace()
	if l.pos < len(l.s) && l.s[l.pos] == '{' {
		l.pos++
		lbls, err := parseLabels(l)
		if err != nil {
			return s, fmt.Errorf("metric %s: %w", s.Name, err)
		}
		s.Labels = lbls
	}
	l.skipSpace()
	valStr := l.field()
	if valStr == "" {
		return s, fmt.Errorf("metric %s: missing value", s.Name)
	}
	v, err := strconv.ParseFloat(valStr, 64)
	if err != nil {
		return s, fmt.Errorf("metric %s: invalid value %q", s.Name, valStr)
	}
	if err := checkValue(v); err != nil {
		return s, fmt.Errorf("metric %s: %w", s.Name, err)
	}
	s.Value = v
	l.skipSpace()
	if om {
		if l.pos < len(l.s) && l.s[l.pos] != '#' {
			ts, err := parseSeconds(s.Name, l.field())
			if err != nil {
				return s, err
			}
			s.Timestamp = ts
			l.skipSpace()
		}
		if l.pos < len(l.s) && l.s[l.pos] == '#' {
			l.pos = len(l.s) // an exemplar: not stored
		}
	} else if tsStr := l.field(); tsStr != "" {
		ms, err := strconv.ParseInt(tsStr, 10, 64)
		if err != nil {
			return s, fmt.Errorf("metric %s: invalid timestamp %q (milliseconds since the epoch)", s.Name, tsStr)
		}
		// UnixNano must represent it: ms*1e6 may not wrap
		if ms <= 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			return s, fmt.Errorf("metric %s: timestamp %d out of range (milliseconds after the epoch, at most %d)", s.Name, ms, math.MaxInt64/int64(time.Millisecond))
		}
		s.Timestamp = time.UnixMilli(ms)
	}
	l.skipSpace()
	if l.pos != len(l.s) {
		return s, fmt.Errorf("metric %s: unexpected %q after the value", s.Name, l.s[l.pos:])
	}
	return s, nil
}

// parseLabels parses `name="value", ...}` after the opening brace.
func parseLabels(l *lexer) (map[string]string, error) {
	lbls := map[string]string{}
	for {
		l.skipSpace()
		if l.pos >= len(l.s) {
			return nil, errors.New("unterminated label set")
		}
		if l.s[l.pos] == '}' {
			l.pos++
			return lbls, checkLabels(lbls)
		}
		name := l.ident(labelFirst, labelRest)
		if name == "" {
			return nil, fmt.Errorf("expected a label name at column %d", l.pos+1)
		}
		if !ValidLabelName(name) {
			return nil, fmt.Errorf("invalid label name %q", name)
		}
		if _, dup := lbls[name]; dup {
			return nil, fmt.Errorf("duplicate label %q", name)
		}
		l.skipSpace()
		if l.pos >= len(l.s) || l.s[l.pos] != '=' {
			return nil, fmt.Errorf("expected '=' after label %s", name)
		}
		l.pos++
		l.skipSpace()
		if l.pos >= len(l.s) || l.s[l.pos] != '"' {
			return nil, fmt.Errorf("expected '\"' to open the value of label %s", name)
		}
		l.pos++
		var b strings.Builder
		closed := false
		for l.pos < len(l.s) {
			c := l.s[l.pos]
			l.pos++
			if c == '"' {
				closed = true
				break
			}
			if c != '\\' {
				b.WriteByte(c)
				continue
			}
			if l.pos >= len(l.s) {
				break
			}
			switch e := l.s[l.pos]; e {
			case '\\', '"':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			default:
				return nil, fmt.Errorf("label %s: invalid escape \\%c", name, e)
			}
			l.pos++
		}
		if !closed {
			return nil, fmt.Errorf("label %s: unterminated value", name)
		}
		lbls[name] = b.String()
		l.skipSpace()
		if l.pos < len(l.s) && l.s[l.pos] == ',' {
			l.pos++
			continue
		}
		if l.pos < len(l.s) && l.s[l.pos] == '}' {
			continue
		}
		return nil, fmt.Errorf("expected ',' or '}' after label %s", name)
	}
}

// JSONSeries is one series of the JSON format.
type JSONSeries struct {
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels,omitempty"`
	Value     *float64          `json:"value"`
	Timestamp *time.Time        `json:"timestamp,omitempty"`
}

// JSONBody is the JSON push body.
type JSONBody struct {
	Series []JSONSeries `json:"series"`
}

// jsonShape says which keys an object of the JSON body may have; nil fields
// means any key (labels).
type jsonShape struct {
	fields map[string]*jsonShape
	elem   *jsonShape // of an array
	labels bool       // an object with free keys
}

var (
	labelsShape = &jsonShape{labels: true}
	seriesShape = &jsonShape{fields: map[string]*jsonShape{"name": nil, "labels": labelsShape, "value": nil, "timestamp": nil}}
	bodyShape   = &jsonShape{fields: map[string]*jsonShape{"series": {elem: seriesShape}}}
)

// checkJSONKeys walks the first JSON value of data token by token and
// refuses what encoding/json would take silently: a duplicate key in any
// object (it keeps the last) and a field name that differs from the
// format's only by case (it matches them case-insensitively). Type errors
// are left to the decoder.
func checkJSONKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return walkJSON(dec, "", bodyShape)
}

func walkJSON(dec *json.Decoder, path string, shape *jsonShape) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("invalid JSON body: %w", err)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	where := func() string {
		if path == "" {
			return ""
		}
		return path + ": "
	}
	switch d {
	case '[':
		var elem *jsonShape
		if shape != nil {
			elem = shape.elem
		}
		for i := 0; dec.More(); i++ {
			if err := walkJSON(dec, fmt.Sprintf("%s[%d]", path, i), elem); err != nil {
				return err
			}
		}
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return fmt.Errorf("invalid JSON body: %w", err)
			}
			key, _ := kt.(string)
			if seen[key] {
				return fmt.Errorf("%sduplicate key %q", where(), key)
			}
			seen[key] = true
			var child *jsonShape
			if shape != nil && !shape.labels {
				if shape.fields != nil {
					c, known := shape.fields[key]
					if !known {
						names := make([]string, 0, len(shape.fields))
						for n := range shape.fields {
							names = append(names, n)
						}
						sort.Strings(names)
						return fmt.Errorf("%sunknown field %q (field names are case-sensitive: %s)", where(), key, strings.Join(names, ", "))
					}
					child = c
				}
			}
			childPath := key
			if path != "" {
				childPath = path + "." + key
			}
			if err := walkJSON(dec, childPath, child); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return fmt.Errorf("invalid JSON body: %w", err)
	}
	return nil
}

// ParseJSON parses the JSON format. Field names are exact (case-sensitive)
// and duplicate keys are refused, in the body and in "labels".
func ParseJSON(data []byte) ([]providers.Sample, error) {
	if err := checkJSONKeys(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var body JSONBody
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf("invalid JSON body: %w", err)
	}
	if dec.More() {
		return nil, errors.New("invalid JSON body: data after the object")
	}
	if body.Series == nil {
		return nil, errors.New(`invalid JSON body: "series" is required`)
	}
	if len(body.Series) > MaxSamplesPerPush {
		return nil, fmt.Errorf("more than %d series in one push", MaxSamplesPerPush)
	}
	out := make([]providers.Sample, 0, len(body.Series))
	for i, js := range body.Series {
		if !ValidMetricName(js.Name) {
			return nil, fmt.Errorf("series[%d].name: invalid metric name %q", i, js.Name)
		}
		if err := checkLabels(js.Labels); err != nil {
			return nil, fmt.Errorf("series[%d].labels: %w", i, err)
		}
		if js.Value == nil {
			return nil, fmt.Errorf("series[%d].value: required", i)
		}
		if err := checkValue(*js.Value); err != nil {
			return nil, fmt.Errorf("series[%d].value: %w", i, err)
		}
		s := providers.Sample{Name: js.Name, Labels: js.Labels, Value: *js.Value}
		if js.Timestamp != nil {
			if !TimeInRange(*js.Timestamp) {
				return nil, fmt.Errorf("series[%d].timestamp: %s out of range (after 1970-01-01T00:00:00Z, up to 2262-04-11T23:47:16Z)", i, js.Timestamp.UTC().Format(time.RFC3339Nano))
			}
			s.Timestamp = *js.Timestamp
		}
		out = append(out, s)
	}
	return out, nil
}

// FormatText writes samples in the text format ParseText reads; timestamps
// are written in milliseconds.
func FormatText(samples []providers.Sample) []byte {
	var b bytes.Buffer
	for _, s := range samples {
		b.WriteString(s.Name)
		if len(s.Labels) > 0 {
			keys := make([]string, 0, len(s.Labels))
			for k := range s.Labels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(k)
				b.WriteString(`="`)
				b.WriteString(escapeValue(s.Labels[k]))
				b.WriteByte('"')
			}
			b.WriteByte('}')
		}
		b.WriteByte(' ')
		b.WriteString(strconv.FormatFloat(s.Value, 'g', -1, 64))
		if !s.Timestamp.IsZero() {
			b.WriteByte(' ')
			b.WriteString(strconv.FormatInt(s.Timestamp.UnixMilli(), 10))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

var valueEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeValue(v string) string { return valueEscaper.Replace(v) }
