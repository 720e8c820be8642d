package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// module is a build-only Go module under hack/cluster/build and the binaries it makes.
type module struct {
	name     string
	outputs  []string
	packages []string
	ldflags  func(kubeVersion string) string
	tags     string   // go build -tags
	env      []string // added to go build's environment
	// built names what go build writes for each of outputs, when it differs (a
	// command's folder name), in the same order.
	built []string
	// optIn: built only with its up flag (build --keda), not by a plain build.
	optIn bool
	// kube: its binaries are built from k8s.io/kubernetes and carry the cluster's
	// version; every other module's binaries do not depend on the cluster's version,
	// so a build of the same module files under another version's cache folder is
	// reused (reuseBuilt) instead of rebuilt, which for KEDA saves about an hour.
	kube bool
}

func modules() []module {
	return []module{
		{name: "clusterutil", outputs: []string{"clusterutil"}, packages: []string{"."}},
		{name: "kubernetes", outputs: []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"},
			packages: []string{"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager",
				"k8s.io/kubernetes/cmd/kube-scheduler", "k8s.io/kubernetes/cmd/kubectl"},
			ldflags: kubeLdflags, kube: true},
		{name: "etcd", outputs: []string{"etcd"}, packages: []string{"."}},
		{name: "kwok", outputs: []string{"kwok"}, packages: []string{"sigs.k8s.io/kwok/cmd/kwok"}},
		{name: "metrics-server", outputs: []string{"metrics-server"}, packages: []string{"sigs.k8s.io/metrics-server/cmd/metrics-server"}},
		// prometheus-adapter v0.12, only for the parity e2e and the adapter benchmark (its command is named adapter).
		{name: "prometheus-adapter", outputs: []string{"adapter"}, packages: []string{"sigs.k8s.io/prometheus-adapter/cmd/adapter"}},
		// The real node's kubelet and kube-proxy: the control plane's k8s.io/kubernetes
		// version and replace directives, in a folder of their own (see its go.mod).
		{name: "kubernetes-node", outputs: []string{"kubelet", "kube-proxy"},
			packages: []string{"k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-proxy"}, ldflags: kubeLdflags, kube: true},
		// containerd without the snapshotters that need cgo or kernel features we do not use.
		{name: "containerd", outputs: []string{"containerd", "ctr", "containerd-shim-runc-v2"},
			packages: []string{"github.com/containerd/containerd/v2/cmd/containerd", "github.com/containerd/containerd/v2/cmd/ctr",
				"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"},
			ldflags: func(string) string {
				return "-X github.com/containerd/containerd/v2/version.Version=" + strings.TrimPrefix(containerdVersion, "v")
			},
			tags: "no_btrfs no_devmapper no_zfs no_aufs"},
		{name: "coredns", outputs: []string{"coredns"}, packages: []string{"."}},
		// The pod sandbox ("pause") program of the real node's sandbox image.
		{name: "sandbox", outputs: []string{"sandbox"}, packages: []string{"."}},
		// KEDA's operator and metrics server (up --keda): its commands operator and adapter
		// (a name prometheus-adapter's binary has in the cache), renamed.
		{name: "keda", outputs: []string{"keda-operator", "keda-metrics-server"}, built: []string{"operator", "adapter"},
			packages: []string{"github.com/kedacore/keda/v2/cmd/operator", "github.com/kedacore/keda/v2/cmd/adapter"},
			ldflags: func(string) string {
				return "-X github.com/kedacore/keda/v2/version.Version=" + strings.TrimPrefix(kedaVersion, "v")
			},
			optIn: true},
	}
}

// buildEnv is go build's environment for a build module: the caller's GOFLAGS
// kept (CI's -trimpath: the Go build cache shares a compiled package only between
// builds with the same flags, so a GOFLAGS of its own would compile every package
// the project shares with the cluster a second time), no cgo for any module (so
// that the control plane, the node and the project share packages on any machine,
// not only under CI's CGO_ENABLED=0), and the module's go.mod as it is.
func buildEnv(goflags string) []string {
	return []string{"GOWORK=off", "CGO_ENABLED=0", "GOFLAGS=" + strings.TrimSpace(goflags+" -mod=readonly")}
}

func kubeLdflags(v string) string {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	minor := ""
	if len(parts) > 1 {
		minor = parts[1]
	}
	return strings.Join([]string{
		"-X k8s.io/component-base/version.gitVersion=" + v,
		"-X k8s.io/component-base/version.gitMajor=" + parts[0],
		"-X k8s.io/component-base/version.gitMinor=" + minor,
		"-X k8s.io/component-base/version.gitTreeState=clean",
		"-X k8s.io/client-go/pkg/version.gitVersion=" + v,
	}, " ")
}

// neededModules are the build modules up needs with the cluster's options: not
// prometheus-adapter (no component runs it), not metrics-server without pod stages.
func (c *Cluster) neededModules() []string {
	names := []string{"clusterutil", "kubernetes", "etcd", "kwok"}
	if c.PodStages {
		names = append(names, "metrics-server")
	}
	if c.RealNode {
		names = append(names, realNodeModules...)
	}
	if c.KEDA {
		names = append(names, "keda")
	}
	return names
}

// AllModules names every build module a plain `build` builds: all but the
// opt-in ones (KEDA, whose cold build alone takes about an hour here).
func AllModules() []string {
	var names []string
	for _, m := range modules() {
		if !m.optIn {
			names = append(names, m.name)
		}
	}
	return names
}

// buildModules is what `build` builds with the options: AllModules, and
// KEDA with --keda.
func (c *Cluster) buildModules() []string {
	names := AllModules()
	if c.KEDA {
		names = append(names, "keda")
	}
	return names
}

// Build builds the named build modules into the cache (all of them when names is empty),
// each unless its binaries were built from the same module files, then kwok's configs.
// Each module has its own lock: a build of prometheus-adapter, which only two e2e tests
// run, goes on beside up's build of the control plane instead of holding it up (.ci/run).
func (c *Cluster) Build(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		names = AllModules()
	}
	if err := checkModuleNames(names); err != nil {
		return err
	}
	if err := os.MkdirAll(c.Bin, 0o755); err != nil {
		return err
	}
	for _, m := range modules() {
		if !contains(names, m.name) {
			continue
		}
		if err := c.buildModuleLocked(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// buildModuleLocked builds m under its module's lock: a second build of the same
// module waits, then finds the first one's binaries. The wait is long because a cold
// build of the control plane took 26 minutes here.
func (c *Cluster) buildModuleLocked(ctx context.Context, m module) error {
	unlock, err := lockFile(ctx, filepath.Join(c.CacheDir, ".build-"+m.name+".lock"), time.Hour)
	if err != nil {
		return fmt.Errorf("build %s: %w", m.name, err)
	}
	defer unlock()
	if err := c.buildModule(ctx, m); err != nil {
		return err
	}
	switch m.name {
	case "prometheus-adapter":
		link := filepath.Join(c.Bin, "prometheus-adapter")
		_ = os.Remove(link)
		return os.Symlink("adapter", link)
	case "kwok":
		return c.writeKwokConfig(ctx)
	}
	return nil
}

// checkModuleNames fails on a name that is no build module, with the valid ones.
func checkModuleNames(names []string) error {
	var valid []string
	for _, m := range modules() {
		valid = append(valid, m.name)
	}
	for _, n := range names {
		if !contains(valid, n) {
			return fmt.Errorf("unknown build module %q (hack/cluster/build has %s)", n, strings.Join(valid, ", "))
		}
	}
	return nil
}

// moduleStamp is the sha256 (16 hex digits) of the module's go.mod, go.sum and *.go, as the
// shell script computed it, so that binaries it built stay valid.
func moduleStamp(src string) (string, error) {
	files := []string{filepath.Join(src, "go.mod"), filepath.Join(src, "go.sum")}
	gofiles, _ := filepath.Glob(filepath.Join(src, "*.go"))
	sort.Strings(gofiles)
	h := sha256.New()
	for _, f := range append(files, gofiles...) {
		data, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func (c *Cluster) buildModule(ctx context.Context, m module) error {
	src := filepath.Join(c.RepoRoot, "hack", "cluster", "build", m.name)
	stampFile := filepath.Join(c.Bin, "."+m.name+".stamp")
	stamp, err := moduleStamp(src)
	if err != nil {
		return fmt.Errorf("build %s: %w", m.name, err)
	}
	missing := false
	for _, o := range m.outputs {
		if st, err := os.Stat(filepath.Join(c.Bin, o)); err != nil || st.Mode()&0o111 == 0 {
			missing = true
		}
	}
	if old, err := os.ReadFile(stampFile); !missing && err == nil && strings.TrimSpace(string(old)) == stamp {
		return nil
	}
	if !m.kube {
		reused, err := c.reuseBuilt(m, stamp)
		if err != nil {
			return fmt.Errorf("build %s: %w", m.name, err)
		}
		if reused != "" {
			c.logf("    reusing %s built from the same module files in %s", strings.Join(m.outputs, " "), reused)
			return nil
		}
	}
	t0 := time.Now()
	blog := filepath.Join(c.CacheDir, "build-"+m.name+".log")
	tmp, err := os.MkdirTemp(c.Bin, ".build-"+m.name+".")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	outputs := strings.Join(m.outputs, " ")
	c.logf("    building %s (module hack/cluster/build/%s; log %s)", outputs, m.name, blog)
	ldflags := "-s -w"
	if m.ldflags != nil {
		ldflags += " " + m.ldflags(c.KubeVersion)
	}
	args := []string{"build", "-buildvcs=false", "-ldflags", ldflags, "-o", tmp + "/"}
	if m.tags != "" {
		args = append(args, "-tags", m.tags)
	}
	args = append(args, m.packages...)
	out, err := run(ctx, src, append(buildEnv(os.Getenv("GOFLAGS")), m.env...), nil, "go", args...)
	_ = os.WriteFile(blog, []byte(out), 0o644)
	if err != nil {
		fmt.Fprintln(c.Err, lastLines(strings.TrimSpace(out), 30))
		return fmt.Errorf("building %s failed (full log: %s)", outputs, blog)
	}
	for i, o := range m.outputs {
		from := o
		if i < len(m.built) {
			from = m.built[i]
		}
		if err := os.Rename(filepath.Join(tmp, from), filepath.Join(c.Bin, o)); err != nil {
			return err
		}
	}
	if err := os.WriteFile(stampFile, []byte(stamp+"\n"), 0o644); err != nil {
		return err
	}
	c.logf("    built %s in %s", outputs, secs(time.Since(t0)))
	return nil
}

// reuseBuilt copies m's binaries from another Kubernetes version's cache folder
// (CacheRoot/v*/bin) whose stamp equals stamp, and returns that folder ("" when
// none has them).
func (c *Cluster) reuseBuilt(m module, stamp string) (string, error) {
	dirs, _ := filepath.Glob(filepath.Join(c.CacheRoot, "v*", "bin"))
	sort.Sort(sort.Reverse(sort.StringSlice(dirs))) // the newest version first, by name
	for _, dir := range dirs {
		if dir == c.Bin {
			continue
		}
		if old, err := os.ReadFile(filepath.Join(dir, "."+m.name+".stamp")); err != nil || strings.TrimSpace(string(old)) != stamp {
			continue
		}
		complete := true
		for _, o := range m.outputs {
			if st, err := os.Stat(filepath.Join(dir, o)); err != nil || st.Mode()&0o111 == 0 {
				complete = false
			}
		}
		if !complete {
			continue
		}
		for _, o := range m.outputs {
			if err := copyExecutable(filepath.Join(dir, o), filepath.Join(c.Bin, o)); err != nil {
				return "", err
			}
		}
		if err := os.WriteFile(filepath.Join(c.Bin, "."+m.name+".stamp"), []byte(stamp+"\n"), 0o644); err != nil {
			return "", err
		}
		return dir, nil
	}
	return "", nil
}

// copyExecutable copies from to to through a temporary file renamed into place, so
// that a running copy of to is never overwritten. A hard link when the file system
// allows, else a copy.
func copyExecutable(from, to string) error {
	tmp := to + ".reuse"
	_ = os.Remove(tmp)
	if err := os.Link(from, tmp); err != nil {
		data, rerr := os.ReadFile(from)
		if rerr != nil {
			return rerr
		}
		if err := os.WriteFile(tmp, data, 0o755); err != nil {
			return err
		}
	}
	return os.Rename(tmp, to)
}

// writeKwokConfig assembles kwok's configuration (kwok ships no stages): stages for fast
// nodes and pods, resource-usage metrics from pod annotations, from its module's kustomize
// folder; kwok-nodes.yaml has the node stages only (--no-pod-stages).
func (c *Cluster) writeKwokConfig(ctx context.Context) error {
	out, nodesOut := filepath.Join(c.CacheDir, "kwok.yaml"), filepath.Join(c.CacheDir, "kwok-nodes.yaml")
	if newerNonEmpty(out, filepath.Join(c.Bin, "kwok")) && newerNonEmpty(nodesOut, filepath.Join(c.Bin, "kwok")) {
		return nil
	}
	dir, err := run(ctx, filepath.Join(c.RepoRoot, "hack", "cluster", "build", "kwok"), []string{"GOWORK=off"}, nil,
		"go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok")
	if err != nil {
		return fmt.Errorf("cannot find the sigs.k8s.io/kwok module folder: %w: %s", err, dir)
	}
	kdir := filepath.Join(strings.TrimSpace(dir), "kustomize")
	nodeStages := []string{"stage/node/fast/node-initialize.yaml", "stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml"}
	all := append(append([]string{}, nodeStages...), "stage/pod/fast/pod-ready.yaml", "stage/pod/fast/pod-complete.yaml",
		"stage/pod/fast/pod-delete.yaml", "metrics/resource/metrics-resource.yaml", "metrics/usage/usage-from-annotation.yaml")
	for _, f := range []struct {
		path  string
		parts []string
	}{{out, all}, {nodesOut, nodeStages}} {
		var docs []string
		for _, p := range f.parts {
			data, err := os.ReadFile(filepath.Join(kdir, p))
			if err != nil {
				return fmt.Errorf("kwok module has no kustomize/%s: %w", p, err)
			}
			docs = append(docs, string(data))
		}
		if err := writeFileAtomic(f.path, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func newerNonEmpty(path, than string) bool {
	a, err := os.Stat(path)
	if err != nil || a.Size() == 0 {
		return false
	}
	b, err := os.Stat(than)
	return err == nil && a.ModTime().After(b.ModTime())
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.WriteFile(path+".tmp", data, mode); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// buildWorkTree builds a command of this checkout (./cmd/adapter, ./hack/exporter) into
// the state folder's bin, its output in logs/NAME-build.log.
func (c *Cluster) buildWorkTree(ctx context.Context, pkg, out, logName string) error {
	if err := os.MkdirAll(filepath.Join(c.Dir, "bin"), 0o755); err != nil {
		return err
	}
	blog := filepath.Join(c.Dir, "logs", logName+"-build.log")
	output, err := run(ctx, c.RepoRoot, nil, nil, "go", "build", "-o", filepath.Join(c.Dir, "bin", out), pkg)
	_ = os.WriteFile(blog, []byte(output), 0o644)
	if err != nil {
		fmt.Fprintln(c.Err, lastLines(strings.TrimSpace(output), 30))
		return fmt.Errorf("building %s failed (full log: %s)", pkg, blog)
	}
	return nil
}

// lockFile takes an exclusive flock on path, waiting at most timeout; the returned
// function releases it. Its descriptor is close-on-exec: no child process holds it.
func lockFile(ctx context.Context, path string, timeout time.Duration) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("could not lock %s within %s (another hack/cluster.sh holds it): %w", path, timeout, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
