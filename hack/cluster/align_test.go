package cluster

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newerThanProject lists, per build module, the modules it shares with the project's
// go.mod at a higher version than the project's, and that version: the component
// requires it, and MVS cannot lower it without an older component. The Go build cache
// shares a compiled package between the project and the cluster only when the
// package's module and all its dependencies have the same versions (and the same
// flags), so every other shared module is at the project's version: a component
// whose requirement is older is raised to the project's (go get MODULE@VERSION in its
// folder, then go mod tidy). Raising the project to these versions would let it
// share more (cbor and gnostic-models: metrics-server's k8s.io/* packages; x/sys:
// etcd's); the test then names the entries to drop.
var newerThanProject = map[string]map[string]string{
	"containerd": {
		"github.com/felixge/httpsnoop":                                                "v1.1.0",
		"github.com/fsnotify/fsnotify":                                                "v1.10.1",
		"github.com/fxamacker/cbor/v2":                                                "v2.9.4",
		"github.com/grpc-ecosystem/grpc-gateway/v2":                                   "v2.30.0",
		"github.com/prometheus/client_golang":                                         "v1.24.1",
		"github.com/prometheus/common":                                                "v0.70.1",
		"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc": "v0.71.0",
		"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp":               "v0.71.0",
		"go.opentelemetry.io/otel":                                                    "v1.46.0",
		"go.opentelemetry.io/otel/exporters/otlp/otlptrace":                           "v1.46.0",
		"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc":             "v1.46.0",
		"go.opentelemetry.io/otel/metric":                                             "v1.46.0",
		"go.opentelemetry.io/otel/sdk":                                                "v1.46.0",
		"go.opentelemetry.io/otel/trace":                                              "v1.46.0",
		"golang.org/x/time":                                                           "v0.16.0",
		"google.golang.org/genproto/googleapis/api":                                   "v0.0.0-20260825221802-da73d73af1c5",
		"google.golang.org/genproto/googleapis/rpc":                                   "v0.0.0-20260825221802-da73d73af1c5",
		"google.golang.org/protobuf":                                                  "v1.36.12",
	},
	"coredns": {
		"github.com/prometheus/client_golang": "v1.24.1",
		"github.com/prometheus/common":        "v0.70.1",
	},
	"etcd": {
		"golang.org/x/crypto": "v0.58.0",
		"golang.org/x/net":    "v0.61.0",
		"golang.org/x/sys":    "v0.49.0",
		"golang.org/x/text":   "v0.43.0",
	},
	"metrics-server": {
		"github.com/fsnotify/fsnotify":                                                "v1.10.1",
		"github.com/fxamacker/cbor/v2":                                                "v2.9.2",
		"github.com/google/gnostic-models":                                            "v0.7.1",
		"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc": "v0.69.0",
		"go.uber.org/zap":                                                             "v1.28.0",
		"golang.org/x/exp":                                                            "v0.0.0-20260529124908-c761662dc8c9",
	},
}

// notAligned are the build modules left out of the check, with why.
var notAligned = map[string]string{
	// Its binaries do not depend on the cluster's version and are reused from any
	// version's cache folder (reuseBuilt); aligning it would cost an hour's rebuild
	// that CI never pays (a plain build does not build KEDA).
	"keda": "reused across cluster versions; opt-in",
	// v0.12.0, the reference the parity test compares the adapter with, on its own
	// requirements (k8s.io v0.30): raised to v0.37 it is no longer the release
	// users run. Its binary does not depend on the cluster's version either.
	"prometheus-adapter": "a pinned reference release on its own requirements",
}

// TestBuildModulesShareProjectVersions fails for every module a build module shares
// with the project's go.mod at another version, so that a bump of the project (or of
// a component) cannot silently make CI compile a second copy of the shared packages.
func TestBuildModulesShareProjectVersions(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	project := readModVersions(t, filepath.Join(root, "go.mod"))
	for _, m := range modules() {
		if notAligned[m.name] != "" {
			continue
		}
		path := filepath.Join(root, "hack", "cluster", "build", m.name, "go.mod")
		got := readModVersions(t, path)
		for mod, v := range got {
			pv, shared := project[mod]
			if !shared || pv == v {
				continue
			}
			if newerThanProject[m.name][mod] == v {
				continue
			}
			t.Errorf("hack/cluster/build/%s: %s %s, the project's go.mod has %s (run `go get %s@%s` there, then go mod tidy)",
				m.name, mod, v, pv, mod, pv)
		}
		for mod, v := range newerThanProject[m.name] {
			if got[mod] != v {
				t.Errorf("hack/cluster/build/%s: newerThanProject has %s %s, its go.mod %q (project %q): update or drop the entry",
					m.name, mod, v, got[mod], project[mod])
			}
		}
	}
}

func TestReadModVersions(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "go.mod")
	data := "module x\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes v1.37.2\n\nrequire (\n\tk8s.io/api v0.0.0 // indirect\n\tgithub.com/a/b v1.2.3\n)\n\n" +
		"replace k8s.io/api => k8s.io/api v0.37.2\n\nreplace (\n\tgithub.com/a/b => github.com/a/b v1.2.4\n\tgithub.com/c/d => ../d\n)\n"
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	got := readModVersions(t, p)
	want := map[string]string{"k8s.io/kubernetes": "v1.37.2", "k8s.io/api": "v0.37.2", "github.com/a/b": "v1.2.4"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}

// readModVersions returns the version of every module a go.mod requires, after its
// replace directives (a module replaced by a folder is left out).
func readModVersions(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	req, repl := map[string]string{}, map[string]string{}
	block := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
			continue
		case len(fields) == 2 && fields[1] == "(":
			block = fields[0]
			continue
		case fields[0] == ")":
			block = ""
			continue
		case block == "" && (fields[0] == "require" || fields[0] == "replace"):
			block, fields = fields[0], fields[1:]
			parseModLine(block, fields, req, repl)
			block = ""
			continue
		}
		parseModLine(block, fields, req, repl)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for mod, v := range repl {
		if v == "" {
			delete(req, mod)
		} else if _, ok := req[mod]; ok {
			req[mod] = v
		}
	}
	return req
}

func parseModLine(block string, fields []string, req, repl map[string]string) {
	switch block {
	case "require":
		if len(fields) == 2 {
			req[fields[0]] = fields[1]
		}
	case "replace":
		// "old [v] => new [v]": a folder target has no version.
		i := strings.Index(strings.Join(fields, " "), "=>")
		if i < 0 {
			return
		}
		left := strings.Fields(strings.Join(fields, " ")[:i])
		right := strings.Fields(strings.Join(fields, " ")[i+2:])
		if len(left) == 0 {
			return
		}
		v := ""
		if len(right) == 2 {
			v = right[1]
		}
		repl[left[0]] = v
	}
}
