package cluster

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
)

// State is the state file, DIR/cluster.env: what `up` started, with which settings. It
// is a shell file of KEY=value lines quoted as bash's printf %q does, so that scripts
// can source it (and the e2e reads its STATE_BACKENDS line).
type State struct {
	Version        string
	Nodes          string
	HPASyncPeriod  string
	HPAController  string
	KubernetesOnly string
	Prometheus     string
	Backends       []string
	Record         string
	PodStages      string
	Components     []string
	StartedAt      string
	RepoRoot       string
	RealNode       string // "true" with the real node (older files: empty)
	NodeIP         string // the real node's address
	KEDAAPIQPS     string // up --keda-api-qps; empty at KEDA's defaults
}

// stateKeys lists the file's keys in their order, with the field each one is.
func (s *State) fields() []struct {
	key   string
	value *string
} {
	return []struct {
		key   string
		value *string
	}{
		{"STATE_VERSION", &s.Version},
		{"STATE_NODES", &s.Nodes},
		{"STATE_HPA_SYNC_PERIOD", &s.HPASyncPeriod},
		{"STATE_HPA_CONTROLLER", &s.HPAController},
		{"STATE_KUBERNETES_ONLY", &s.KubernetesOnly},
		{"STATE_PROMETHEUS", &s.Prometheus},
		{"STATE_BACKENDS", nil},
		{"STATE_RECORD", &s.Record},
		{"STATE_POD_STAGES", &s.PodStages},
		{"STATE_COMPONENTS", nil},
		{"STATE_STARTED_AT", &s.StartedAt},
		{"STATE_REPO_ROOT", &s.RepoRoot},
		{"STATE_REAL_NODE", &s.RealNode},
		{"STATE_NODE_IP", &s.NodeIP},
		{"STATE_KEDA_API_QPS", &s.KEDAAPIQPS},
	}
}

// Marshal writes the state file's text.
func (s *State) Marshal() []byte {
	var b bytes.Buffer
	for _, f := range s.fields() {
		var v string
		switch f.key {
		case "STATE_BACKENDS":
			v = strings.Join(s.Backends, " ")
		case "STATE_COMPONENTS":
			v = strings.Join(s.Components, " ")
		default:
			v = *f.value
		}
		fmt.Fprintf(&b, "%s=%s\n", f.key, shellQuote(v))
	}
	return b.Bytes()
}

// ParseState reads a state file's text; unknown keys are ignored, missing ones stay empty.
func ParseState(data []byte) (State, error) {
	var s State
	values := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return s, fmt.Errorf("state file line %d: no KEY=value: %q", n, line)
		}
		u, err := shellUnquote(v)
		if err != nil {
			return s, fmt.Errorf("state file line %d (%s): %w", n, k, err)
		}
		values[k] = u
	}
	for _, f := range s.fields() {
		if f.value != nil {
			*f.value = values[f.key]
		}
	}
	s.Backends = words(values["STATE_BACKENDS"])
	s.Components = words(values["STATE_COMPONENTS"])
	return s, nil
}

// ReadState reads the state file of the state folder dir.
func ReadState(dir string) (State, error) {
	data, err := os.ReadFile(stateFile(dir))
	if err != nil {
		return State{}, err
	}
	return ParseState(data)
}

func writeState(dir string, s *State) error {
	path := stateFile(dir)
	if err := os.WriteFile(path+".tmp", s.Marshal(), 0o644); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	return os.Rename(path+".tmp", path)
}

func stateFile(dir string) string { return dir + "/cluster.env" }

// orDefault returns v, or def when v is empty (a state file from an older script).
func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// shellQuote quotes v as bash's printf %q does for printable text: ” when empty, else
// each character outside the safe set escaped with a backslash.
func shellQuote(v string) string {
	if v == "" {
		return "''"
	}
	var b strings.Builder
	for _, r := range v {
		if !shellSafe(r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func shellSafe(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	case r > 127:
		return true
	}
	return strings.ContainsRune("@%_-+=:./", r)
}

// shellUnquote undoes shellQuote, and also reads single- and double-quoted words.
func shellUnquote(v string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			if i+1 < len(v) {
				i++
				b.WriteByte(v[i])
			}
		case '\'':
			end := strings.IndexByte(v[i+1:], '\'')
			if end < 0 {
				return "", fmt.Errorf("unterminated quote in %q", v)
			}
			b.WriteString(v[i+1 : i+1+end])
			i += end + 1
		case '"':
			end := strings.IndexByte(v[i+1:], '"')
			if end < 0 {
				return "", fmt.Errorf("unterminated quote in %q", v)
			}
			b.WriteString(v[i+1 : i+1+end])
			i += end + 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// singleQuote quotes v for the shell with single quotes, as `env` prints its values.
func singleQuote(v string) string {
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// words splits a space-separated list; none is nil.
func words(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return strings.Fields(s)
}
