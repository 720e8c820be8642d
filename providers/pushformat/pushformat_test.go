package pushformat

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers"
)

func TestParseText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []providers.Sample
	}{
		{"bare", "up 1\n", []providers.Sample{{Name: "up", Value: 1}}},
		{"no final newline, CRLF, comments, blanks",
			"# HELP q depth\r\n# TYPE q gauge\r\n\r\n  q{a=\"b\"} 2.5\r\nq 3",
			[]providers.Sample{{Name: "q", Labels: map[string]string{"a": "b"}, Value: 2.5}, {Name: "q", Value: 3}}},
		{"labels with spaces, trailing comma, escapes",
			`m{ a = "x\"y" , b="line\nbreak\\", } -1e3 1700000000000`,
			[]providers.Sample{{Name: "m", Labels: map[string]string{"a": `x"y`, "b": "line\nbreak\\"}, Value: -1000, Timestamp: time.UnixMilli(1700000000000)}}},
		{"empty label set and colon name", "ns:rate:5m{} 0.25", []providers.Sample{{Name: "ns:rate:5m", Labels: map[string]string{}, Value: 0.25}}},
		{"tabs", "m\t7\t1700000000000\t", []providers.Sample{{Name: "m", Value: 7, Timestamp: time.UnixMilli(1700000000000)}}},
		{"unicode value", `m{city="Zürich"} 1`, []providers.Sample{{Name: "m", Labels: map[string]string{"city": "Zürich"}, Value: 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseText([]byte(tc.in))
			if err != nil {
				t.Fatalf("ParseText: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseTextErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"1abc 1", "line 1: expected a metric name"},
		{"ok 1\nm{a=\"b\" 1", "line 2: metric m: expected ',' or '}'"},
		{`m{a="b} 1`, "unterminated value"},
		{`m{a="b",a="c"} 1`, `duplicate label "a"`},
		{`m{__name__="x"} 1`, `invalid label name "__name__"`},
		{`m{a=b} 1`, "expected '\"'"},
		{`m{a="\x"} 1`, `invalid escape \x`},
		{"m", "missing value"},
		{"m one", `invalid value "one"`},
		{"m NaN", "not finite"},
		{"m +Inf", "not finite"},
		{"m 1 abc", `invalid timestamp "abc"`},
		{"m 1 -5", "out of range"},
		{"m 1 2 3", `unexpected "3"`},
		{"m{a=\"\xff\"} 1", "not valid UTF-8"},
		{"m{1a=\"x\"} 1", "expected a label name"},
		{strings.Repeat("m", MaxNameLen+1) + " 1", "longer than"},
	}
	for _, tc := range tests {
		_, err := ParseText([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseText(%q) error = %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}

func TestParseJSON(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	got, err := ParseJSON([]byte(`{"series":[
		{"name":"queue_depth","labels":{"namespace":"default","queue":"orders"},"value":12.5,"timestamp":"2026-01-02T03:04:05Z"},
		{"name":"up","value":0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []providers.Sample{
		{Name: "queue_depth", Labels: map[string]string{"namespace": "default", "queue": "orders"}, Value: 12.5, Timestamp: ts},
		{Name: "up", Value: 0},
	}
	if len(got) != 2 || !got[0].Timestamp.Equal(ts) || got[0].Value != 12.5 || got[0].Labels["queue"] != "orders" || !reflect.DeepEqual(got[1], want[1]) {
		t.Errorf("got %+v", got)
	}

	errs := []struct{ in, want string }{
		{`{"series":[{"name":"1x","value":1}]}`, "series[0].name"},
		{`{"series":[{"name":"x"}]}`, "series[0].value: required"},
		{`{"series":[{"name":"x","value":1,"labels":{"a-b":"c"}}]}`, "series[0].labels"},
		{`{"series":[{"name":"x","value":1,"extra":true}]}`, `unknown field "extra"`},
		{`{"series":[{"name":"x","value":1,"timestamp":"yesterday"}]}`, "invalid JSON"},
		{`{"series":[{"name":"x","value":1}]} {}`, "data after"},
		{`{}`, `"series" is required`},
		{`[`, "invalid JSON"},
	}
	for _, tc := range errs {
		_, err := ParseJSON([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseJSON(%s) error = %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}

func TestFormatTextRoundTrip(t *testing.T) {
	t.Parallel()
	in := []providers.Sample{
		{Name: "a", Labels: map[string]string{"q": "x\"y\\z\nw", "namespace": "default"}, Value: 1.5, Timestamp: time.UnixMilli(1700000000123)},
		{Name: "b", Value: -2},
		{Name: "c", Value: 9223372036854774},
	}
	out, err := ParseText(FormatText(in))
	if err != nil {
		t.Fatalf("parsing formatted text: %v\n%s", err, FormatText(in))
	}
	if fmt.Sprint(out) != fmt.Sprint(in) {
		t.Errorf("round trip:\n got %v\nwant %v", out, in)
	}
}

// checkSamples verifies what any successful parse must guarantee.
func checkSamples(t *testing.T, samples []providers.Sample) {
	t.Helper()
	for _, s := range samples {
		if !ValidMetricName(s.Name) {
			t.Fatalf("accepted invalid metric name %q", s.Name)
		}
		if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
			t.Fatalf("accepted non-finite value %v", s.Value)
		}
		if err := checkLabels(s.Labels); err != nil {
			t.Fatalf("accepted invalid labels: %v", err)
		}
	}
}

func FuzzParseText(f *testing.F) {
	for _, seed := range []string{
		"up 1\n",
		"# HELP q d\n# TYPE q gauge\nq{a=\"b\",c=\"d\"} 2.5 1700000000000\n",
		`m{a="x\"y\\z\n"} -1e3`,
		"m{} 0\r\nn 1",
		"m{a=\"b\",} +1",
		"m NaN",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		samples, err := ParseText(data)
		if err != nil {
			return
		}
		checkSamples(t, samples)
		// what parses must survive a format/parse round trip unchanged
		again, err := ParseText(FormatText(samples))
		if err != nil {
			t.Fatalf("re-parsing formatted samples: %v\ninput %q\nformatted %q", err, data, FormatText(samples))
		}
		if len(again) != len(samples) {
			t.Fatalf("round trip changed the sample count: %d -> %d", len(samples), len(again))
		}
		for i := range samples {
			a, b := samples[i], again[i]
			if a.Name != b.Name || a.Value != b.Value || !a.Timestamp.Equal(b.Timestamp) || len(a.Labels) != len(b.Labels) {
				t.Fatalf("round trip changed sample %d: %+v -> %+v", i, a, b)
			}
			for k, v := range a.Labels {
				if b.Labels[k] != v {
					t.Fatalf("round trip changed label %s: %q -> %q", k, v, b.Labels[k])
				}
			}
		}
	})
}

func FuzzParseJSON(f *testing.F) {
	f.Add([]byte(`{"series":[{"name":"q","labels":{"namespace":"d"},"value":1.5,"timestamp":"2026-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"series":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		samples, err := ParseJSON(data)
		if err != nil {
			return
		}
		checkSamples(t, samples)
	})
}

// TestValueRange: a value whose milli-value does not fit an int64 would wrap
// in the HPA's Quantity.MilliValue(); it is refused, naming the series.
func TestValueRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    string
		ok   bool
	}{
		{"zero", "0", true},
		{"largest", "9223372036854774", true},
		{"smallest", "-9223372036854774", true},
		{"9.3e15", "9.3e15", false},
		{"-9.3e15", "-9.3e15", false},
		{"1e300", "1e300", false},
		{"-1e308", "-1e308", false},
		{"max float", "1.7976931348623157e308", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, terr := ParseText([]byte(`q{queue="a"} ` + tc.v + "\n"))
			_, jerr := ParseJSON([]byte(`{"series":[{"name":"q","labels":{"queue":"a"},"value":` + tc.v + `}]}`))
			for format, err := range map[string]error{"text": terr, "json": jerr} {
				if tc.ok {
					if err != nil {
						t.Errorf("%s: %s refused: %v", format, tc.v, err)
					}
					continue
				}
				if err == nil || !strings.Contains(err.Error(), "milli-value") || !(strings.Contains(err.Error(), "metric q") || strings.Contains(err.Error(), "series[0]")) {
					t.Errorf("%s: %s: error = %v, want one naming the series and the milli-value range", format, tc.v, err)
				}
			}
		})
	}
}

// TestTimestampRange: timestamps outside what time.Time.UnixNano represents
// (1677-09-21 to 2262-04-11) wrapped around and passed the range check.
func TestTimestampRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, json, text string
		ok               bool
	}{
		{"2026", `"2026-01-01T00:00:00Z"`, "1767225600000", true},
		{"last ms", `"2262-04-11T23:47:16.854Z"`, "9223372036854", true},
		{"1615 wraps to 2200", `"1615-01-01T00:00:00Z"`, "", false},
		{"1677 just before the range", `"1677-09-21T00:12:43Z"`, "", false},
		{"2263", `"2263-01-01T00:00:00Z"`, "9223372036855", false},
		{"9999", `"9999-12-31T23:59:59Z"`, "253402300799000", false},
		{"epoch", `"1970-01-01T00:00:00Z"`, "0", false},
		{"1969", `"1969-12-31T23:59:59Z"`, "-1000", false},
		{"int64 ms", "", "9223372036854775807", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.json != "" {
				got, err := ParseJSON([]byte(`{"series":[{"name":"q","value":1,"timestamp":` + tc.json + `}]}`))
				switch {
				case tc.ok && err != nil:
					t.Errorf("json %s refused: %v", tc.json, err)
				case !tc.ok && (err == nil || !strings.Contains(err.Error(), "series[0].timestamp")):
					t.Errorf("json %s: got %v, error %v; want an out-of-range error naming series[0].timestamp", tc.json, got, err)
				}
			}
			if tc.text != "" {
				got, err := ParseText([]byte("q 1 " + tc.text))
				switch {
				case tc.ok && err != nil:
					t.Errorf("text %s refused: %v", tc.text, err)
				case !tc.ok && (err == nil || !strings.Contains(err.Error(), "metric q")):
					t.Errorf("text %s: got %v, error %v; want an error naming metric q", tc.text, got, err)
				}
			}
		})
	}
}

// TestParseJSONStrict: encoding/json takes the last of duplicate keys and
// matches field names case-insensitively; the push format does neither.
func TestParseJSONStrict(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"upper-case series", `{"SERIES":[{"name":"q","value":1}]}`, `unknown field "SERIES"`},
		{"Value besides value", `{"series":[{"name":"q","value":1,"Value":2}]}`, `series[0]: unknown field "Value"`},
		{"Name", `{"series":[{"Name":"q","value":1}]}`, `series[0]: unknown field "Name"`},
		{"duplicate value", `{"series":[{"name":"q","value":1,"value":2}]}`, `series[0]: duplicate key "value"`},
		{"duplicate series", `{"series":[],"series":[{"name":"q","value":1}]}`, `duplicate key "series"`},
		{"duplicate label", `{"series":[{"name":"q","value":1,"labels":{"a":"1","a":"2"}}]}`, `series[0].labels: duplicate key "a"`},
		{"duplicate in second series", `{"series":[{"name":"q","value":1},{"name":"q","name":"r","value":1}]}`, `series[1]: duplicate key "name"`},
		{"escaped duplicate", `{"series":[{"name":"q","value":1,"valu\u0065":2}]}`, `duplicate key "value"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseJSON([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseJSON(%s) = %v, %v; want an error containing %q", tc.in, got, err, tc.want)
			}
		})
	}
	// labels are case-sensitive keys, not fields: both stay
	got, err := ParseJSON([]byte(`{"series":[{"name":"q","value":1,"labels":{"a":"1","A":"2"}}]}`))
	if err != nil || len(got) != 1 || len(got[0].Labels) != 2 {
		t.Errorf("labels a and A: %v %v", got, err)
	}
}
