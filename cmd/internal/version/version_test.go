package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestRequested(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--version"}, true},
		{[]string{"--secure-port=6443", "--version"}, true},
		{[]string{"--version=true"}, true},
		{[]string{"--version=false"}, false},
		{[]string{"--", "--version"}, false},
		{[]string{"--versions"}, false},
		{[]string{"check-config", "-f", "x.yaml"}, false},
	}
	for _, tc := range tests {
		if got := Requested(tc.args); got != tc.want {
			t.Errorf("Requested(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// TestString cannot run in parallel: it sets the link-time variables.
func TestString(t *testing.T) {
	defer func(v, c string) { Version, Commit = v, c }(Version, Commit)
	Version, Commit = "v9.8.7", "0123abcd"
	got := String("metricscale-adapter")
	want := "metricscale-adapter v9.8.7 (commit 0123abcd, " + runtime.Version() + ")"
	if got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	Commit = ""
	if got := String("x"); strings.Contains(got, "commit ,") || !strings.HasPrefix(got, "x v9.8.7 (commit ") {
		t.Errorf("String() without a stamped commit = %q, want a VCS revision or \"unknown\"", got)
	}
}
