package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// seriesStore holds the series set with POST /set.
type seriesStore struct {
	mu sync.Mutex
	m  map[string]sample // by key()
}

func newSeriesStore() *seriesStore { return &seriesStore{m: map[string]sample{}} }

func (s *seriesStore) set(samples []sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range samples {
		s.m[x.key()] = x
	}
}

func (s *seriesStore) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.m)
}

func (s *seriesStore) series() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]sample, 0, len(s.m))
	for _, x := range s.m {
		out = append(out, x)
	}
	return out
}

// families whose TYPE the exporter declares; the others are untyped.
var metricTypes = map[string]string{
	"container_cpu_usage_seconds_total":  "counter",
	"container_memory_working_set_bytes": "gauge",
	"node_cpu_usage_seconds_total":       "counter",
	"node_memory_working_set_bytes":      "gauge",
}

// formatText writes samples in the Prometheus text format, sorted so that the series of
// each metric are together, as the format wants.
func formatText(samples []sample) string {
	keys := make([]string, len(samples))
	for i := range samples {
		keys[i] = samples[i].key()
	}
	idx := make([]int, len(samples))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		sa, sb := samples[idx[a]], samples[idx[b]]
		if sa.name != sb.name {
			return sa.name < sb.name
		}
		return keys[idx[a]] < keys[idx[b]]
	})
	var b strings.Builder
	last := ""
	for _, i := range idx {
		s := samples[i]
		if s.name != last {
			if t, ok := metricTypes[s.name]; ok {
				fmt.Fprintf(&b, "# TYPE %s %s\n", s.name, t)
			}
			last = s.name
		}
		b.WriteString(keys[i])
		b.WriteByte(' ')
		b.WriteString(formatValue(s.value))
		b.WriteByte('\n')
	}
	return b.String()
}

func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func escapeLabelValue(v string) string {
	if !strings.ContainsAny(v, "\\\"\n") {
		return v
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

// parseText reads sample lines of the Prometheus text format: `name{label="value",...} value`.
// Empty lines and # comments (HELP, TYPE) are skipped; timestamps are refused, since
// Prometheus should stamp the samples with its scrape time. Labels with an empty value
// are dropped, as Prometheus does.
func parseText(body string) ([]sample, error) {
	var out []sample
	for n, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseLine(line string) (sample, error) {
	var s sample
	i := 0
	for i < len(line) && isNameChar(line[i], i == 0, true) {
		i++
	}
	if i == 0 {
		return s, fmt.Errorf("no metric name")
	}
	s.name = line[:i]
	seen := map[string]bool{}
	if i < len(line) && line[i] == '{' {
		i++
		for {
			i = skipSpaces(line, i)
			if i < len(line) && line[i] == '}' {
				i++
				break
			}
			start := i
			for i < len(line) && isNameChar(line[i], i == start, false) {
				i++
			}
			name := line[start:i]
			if name == "" {
				return s, fmt.Errorf("bad label name at column %d", start+1)
			}
			if strings.HasPrefix(name, "__") {
				return s, fmt.Errorf("label name %q is reserved", name)
			}
			if seen[name] {
				return s, fmt.Errorf("label %q given twice", name)
			}
			seen[name] = true
			i = skipSpaces(line, i)
			if i >= len(line) || line[i] != '=' {
				return s, fmt.Errorf(`label %q: want ="value"`, name)
			}
			i = skipSpaces(line, i+1)
			if i >= len(line) || line[i] != '"' {
				return s, fmt.Errorf(`label %q: want ="value"`, name)
			}
			i++ // opening quote
			var v strings.Builder
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) {
					i++
					switch line[i] {
					case 'n':
						v.WriteByte('\n')
					case '\\', '"':
						v.WriteByte(line[i])
					default:
						return s, fmt.Errorf(`label %q: bad escape \%c`, name, line[i])
					}
					continue
				}
				v.WriteByte(line[i])
			}
			if i >= len(line) {
				return s, fmt.Errorf("label %q: unterminated value", name)
			}
			i++ // closing quote
			if v.Len() > 0 {
				s.labels = append(s.labels, label{name, v.String()})
			}
			i = skipSpaces(line, i)
			if i < len(line) && line[i] == ',' {
				i++
				continue
			}
			if i < len(line) && line[i] == '}' {
				i++
				break
			}
			return s, fmt.Errorf("want , or } after label %q", name)
		}
	}
	fields := strings.Fields(line[i:])
	if len(fields) == 0 {
		return s, fmt.Errorf("no value; want name{label=\"value\",...} value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("bad value %q; want name{label=\"value\",...} value", fields[0])
	}
	if len(fields) > 1 {
		if _, err := strconv.ParseInt(fields[1], 10, 64); err == nil && len(fields) == 2 {
			return s, fmt.Errorf("timestamps are not supported (Prometheus stamps samples at scrape time): %q", fields[1])
		}
		return s, fmt.Errorf("unexpected %q after the value", strings.Join(fields[1:], " "))
	}
	s.value = v
	sort.Slice(s.labels, func(a, b int) bool { return s.labels[a].name < s.labels[b].name })
	return s, nil
}

func skipSpaces(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// isNameChar: [a-zA-Z_] (and : in metric names), digits after the first character.
func isNameChar(c byte, first, colon bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case c == ':':
		return colon
	case c >= '0' && c <= '9':
		return !first
	}
	return false
}
