package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/metricscale/metricscale/hack/images/imagebuild"
)

const repoRoot = "../.."

// built is one image as the command printed it.
type built struct {
	ref, digest, configDigest, archive string
}

var resultLine = regexp.MustCompile(`^(\S+)@(sha256:[0-9a-f]{64})  [0-9.]+ MB compressed  image ID (sha256:[0-9a-f]{64})  (\S+)$`)

// buildImages runs the command as `make images` does, into out, with no
// SOURCE_DATE_EPOCH (the commit time stamps the images).
func buildImages(t *testing.T, version, out string) map[string]built {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args := []string{"--root", repoRoot, "--version", version, "--arch", runtime.GOARCH, "--out", out}
	noEnv := func(string) string { return "" }
	if code := run(context.Background(), args, noEnv, &stdout, &stderr); code != 0 {
		t.Fatalf("images %v: exit %d\n%s%s", args, code, stdout.String(), stderr.String())
	}
	t.Logf("images %v:\n%s%s", args, stdout.String(), stderr.String())
	res := map[string]built{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if m := resultLine.FindStringSubmatch(line); m != nil {
			res[m[1]] = built{ref: m[1], digest: m[2], configDigest: m[3], archive: m[4]}
		}
	}
	return res
}

func gitOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", repoRoot}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// makefileVersion is the release version's one source.
func makefileVersion(t *testing.T) string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VERSION \?= (\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no `VERSION ?= ...` line")
	}
	return string(m[1])
}

// TestImages builds the three images twice, reads them back with
// go-containerregistry and with plain archive/tar, runs the binary from the
// layer, and checks the two builds are identical to the byte.
func TestImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries and images")
	}
	version := makefileVersion(t)
	commit := gitOut(t, "rev-parse", "HEAD")
	var sec int64
	if _, err := fmt.Sscan(gitOut(t, "log", "-1", "--format=%ct", "HEAD"), &sec); err != nil {
		t.Fatal(err)
	}
	commitTime := time.Unix(sec, 0).UTC()
	hostCA, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatal(err)
	}

	out := t.TempDir()
	first := buildImages(t, version, out)
	targets := []string{"adapter", "autoscaler", "worker"}
	if len(first) != len(targets) {
		t.Fatalf("built %d images, want %d: %v", len(first), len(targets), first)
	}

	for _, target := range targets {
		ref := "ghcr.io/metricscale/" + target + ":" + version
		b, ok := first[ref]
		if !ok {
			t.Fatalf("no image %s in %v", ref, first)
		}
		if want := filepath.Join(out, target+"-"+version+".tar"); b.archive != want {
			t.Errorf("%s: archive %s, want %s", ref, b.archive, want)
		}
		t.Run(target, func(t *testing.T) {
			tag, err := name.NewTag(ref)
			if err != nil {
				t.Fatal(err)
			}
			img, err := tarball.ImageFromPath(b.archive, &tag)
			if err != nil {
				t.Fatalf("tarball reader: %v", err)
			}
			if err := validate.Image(img); err != nil {
				t.Errorf("validate %s: %v", b.archive, err)
			}
			id, err := img.ConfigName()
			if err != nil || id.String() != b.configDigest {
				t.Errorf("config digest %v (%v), printed %s", id, err, b.configDigest)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			checkConfig(t, cfg, target, version, commit, commitTime)

			layers, err := img.Layers()
			if err != nil || len(layers) != 1 {
				t.Fatalf("layers %d (%v), want 1", len(layers), err)
			}
			rc, err := layers[0].Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			binary := checkLayer(t, rc, target, hostCA, commitTime)

			bin := filepath.Join(t.TempDir(), target)
			if err := os.WriteFile(bin, binary, 0o755); err != nil {
				t.Fatal(err)
			}
			got, err := exec.Command(bin, "--version").CombinedOutput()
			want := fmt.Sprintf("metricscale-%s %s (commit %s, go", target, version, commit)
			if err != nil || !strings.HasPrefix(string(got), want) {
				t.Errorf("%s --version: %v\n%s\nwant it to start with %q", target, err, got, want)
			}

			checkRawArchive(t, b.archive, ref, b.configDigest)
		})
	}

	checkOCILayout(t, imagebuild.OCIDir(out), first)

	// Reproducible: a second build, elsewhere, gives the same digests and
	// the same bytes.
	out2 := t.TempDir()
	second := buildImages(t, version, out2)
	for ref, b := range first {
		b2 := second[ref]
		if b2.digest != b.digest || b2.configDigest != b.configDigest {
			t.Errorf("%s: second build %s (config %s), first %s (config %s)", ref, b2.digest, b2.configDigest, b.digest, b.configDigest)
		}
	}
	if a, b := treeDigests(t, out), treeDigests(t, out2); !maps(a, b) {
		t.Errorf("two builds differ:\nfirst  %v\nsecond %v", a, b)
	}

	t.Run("skopeo", func(t *testing.T) { checkSkopeo(t, out, first) })
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func checkConfig(t *testing.T, cfg *v1.ConfigFile, target, version, commit string, commitTime time.Time) {
	t.Helper()
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	if !cfg.Created.Time.Equal(commitTime) {
		t.Errorf("created %v, want the commit time %v", cfg.Created.Time, commitTime)
	}
	if want := []string{"/" + target}; !slices.Equal(cfg.Config.Entrypoint, want) || len(cfg.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want %q and no cmd", cfg.Config.Entrypoint, cfg.Config.Cmd, want)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cfg.Config.User)
	}
	want := map[string]string{
		"org.opencontainers.image.title":    "metricscale-" + target,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": commit,
		"org.opencontainers.image.source":   "https://github.com/metricscale/metricscale",
		"org.opencontainers.image.created":  commitTime.Format(time.RFC3339),
	}
	for k, v := range want {
		if cfg.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cfg.Config.Labels[k], v)
		}
	}
	lic, err := imagebuild.DetectLicense(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := cfg.Config.Labels["org.opencontainers.image.licenses"]; got != lic || ok != (lic != "") {
		t.Errorf("licenses label %q (set %v), want %q (the repository's licence file; unset without one)", got, ok, lic)
	}
	for _, h := range cfg.History {
		if !h.Created.Time.Equal(commitTime) {
			t.Errorf("history %q created %v, want %v", h.CreatedBy, h.Created.Time, commitTime)
		}
	}
}

// checkLayer reads the layer's files, checks them, and returns the binary.
func checkLayer(t *testing.T, r io.Reader, target string, hostCA []byte, commitTime time.Time) []byte {
	t.Helper()
	var binary []byte
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(commitTime) {
			t.Errorf("%s: mtime %v, want the commit time %v", h.Name, h.ModTime, commitTime)
		}
		if h.Typeflag != tar.TypeReg {
			if h.Typeflag != tar.TypeDir {
				t.Errorf("%s: type %c: want only files and directories (no links)", h.Name, h.Typeflag)
			}
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = body
		if h.Name == target {
			binary = body
			if h.Mode != 0o755 || h.Uid != 0 {
				t.Errorf("%s: mode %o owner %d, want 755 root", h.Name, h.Mode, h.Uid)
			}
		}
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	// Nothing but the binary and the base files: no shell, no package
	// manager, no other binary.
	want := []string{target, "etc/group", "etc/passwd", "etc/ssl/certs/ca-certificates.crt"}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("files %v, want exactly %v", names, want)
	}
	if _, ok := files["bin/sh"]; ok {
		t.Error("the layer holds a shell")
	}
	if !bytes.Equal(files["etc/ssl/certs/ca-certificates.crt"], hostCA) {
		t.Error("CA bundle differs from the build host's")
	}
	if !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") || !strings.Contains(string(files["etc/group"]), "nonroot:x:65532:") {
		t.Errorf("passwd/group without nonroot 65532:\n%s%s", files["etc/passwd"], files["etc/group"])
	}
	if len(binary) == 0 {
		t.Fatalf("no /%s in the layer", target)
	}
	if !bytes.HasPrefix(binary, []byte("\x7fELF")) {
		t.Fatalf("/%s is not an ELF binary", target)
	}
	return binary
}

// checkRawArchive reads the docker archive as docker load does, without
// go-containerregistry: manifest.json, the config named by it, each layer's
// uncompressed digest against the config's rootfs.
func checkRawArchive(t *testing.T, path, ref, configDigest string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if entries[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(manifest) != 1 || !slices.Equal(manifest[0].RepoTags, []string{ref}) {
		t.Fatalf("manifest.json %+v, want one image tagged %s", manifest, ref)
	}
	cfgBytes, ok := entries[manifest[0].Config]
	if !ok {
		t.Fatalf("config %s not in the archive", manifest[0].Config)
	}
	if got := digestOf(cfgBytes); got != configDigest {
		t.Errorf("config digest %s, printed image ID %s", got, configDigest)
	}
	var cfg struct {
		Architecture, OS string
		Config           struct{ User string }
		RootFS           struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(cfgBytes, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Config.User != "65532:65532" {
		t.Errorf("raw config: os %q user %q", cfg.OS, cfg.Config.User)
	}
	if len(cfg.RootFS.DiffIDs) != len(manifest[0].Layers) {
		t.Fatalf("%d diff_ids for %d layers", len(cfg.RootFS.DiffIDs), len(manifest[0].Layers))
	}
	for i, l := range manifest[0].Layers {
		zr, err := gzip.NewReader(bytes.NewReader(entries[l]))
		if err != nil {
			t.Fatalf("layer %s: %v", l, err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("layer %s: %v", l, err)
		}
		if got := digestOf(raw); got != cfg.RootFS.DiffIDs[i] {
			t.Errorf("layer %s: uncompressed digest %s, config says %s", l, got, cfg.RootFS.DiffIDs[i])
		}
	}
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// checkOCILayout validates the layout with go-containerregistry and reads
// index.json and the blobs by hand.
func checkOCILayout(t *testing.T, dir string, images map[string]built) {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Errorf("validate %s: %v", dir, err)
	}
	var ociLayout struct {
		Version string `json:"imageLayoutVersion"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "oci-layout")); err != nil || json.Unmarshal(b, &ociLayout) != nil || ociLayout.Version != "1.0.0" {
		t.Errorf("oci-layout: %s (%v), want imageLayoutVersion 1.0.0", b, err)
	}
	var index struct {
		Manifests []struct {
			MediaType    string
			ArtifactType string
			Digest       string
			Annotations  map[string]string
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil || json.Unmarshal(b, &index) != nil {
		t.Fatalf("index.json: %s (%v)", b, err)
	}
	got := map[string]string{}
	for _, m := range index.Manifests {
		if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.ArtifactType != "" {
			t.Errorf("%s: media type %s artifact type %q, want an OCI image manifest, no artifact type", m.Digest, m.MediaType, m.ArtifactType)
		}
		got[m.Annotations[imagebuild.RefNameAnnotation]] = m.Digest
	}
	want := map[string]string{}
	for ref, b := range images {
		want[ref] = b.digest
	}
	if !maps(got, want) {
		t.Errorf("index.json names %v, want %v", got, want)
	}
	// Every blob is named by its digest.
	blobs := filepath.Join(dir, "blobs", "sha256")
	ents, err := os.ReadDir(blobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(blobs, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if digestOf(b) != "sha256:"+e.Name() {
			t.Errorf("blob %s has digest %s", e.Name(), digestOf(b))
		}
	}
	for _, d := range want {
		if _, err := os.Stat(filepath.Join(blobs, strings.TrimPrefix(d, "sha256:"))); err != nil {
			t.Errorf("manifest %s: %v", d, err)
		}
	}
}

// treeDigests maps every file under dir to its digest.
func treeDigests(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sums[rel] = digestOf(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// checkSkopeo has a third-party implementation of both formats read the
// images: skopeo inspect of each, and skopeo copy from the docker archive
// into a new OCI layout, keeping the config.
func checkSkopeo(t *testing.T, out string, images map[string]built) {
	if _, err := exec.LookPath("skopeo"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("skopeo not found and CI is set: .ci/run installs Debian's skopeo")
		}
		t.Skip("skopeo not found (apt-get install skopeo): the images were not checked by a third-party reader")
	}
	skopeo := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command("skopeo", append([]string{"--insecure-policy"}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("skopeo %v: %v\n%s", args, err, stderr.String())
		}
		return b
	}
	type inspected struct {
		Digest, Architecture, Os string
		Labels                   map[string]string
	}
	for ref, b := range images {
		var fromArchive, fromLayout inspected
		if err := json.Unmarshal(skopeo("inspect", "docker-archive:"+b.archive), &fromArchive); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(skopeo("inspect", "oci:"+imagebuild.OCIDir(out)+":"+ref), &fromLayout); err != nil {
			t.Fatal(err)
		}
		if fromLayout.Digest != b.digest {
			t.Errorf("skopeo inspect oci:...:%s: digest %s, printed %s", ref, fromLayout.Digest, b.digest)
		}
		for _, in := range []inspected{fromArchive, fromLayout} {
			if in.Os != "linux" || in.Architecture != runtime.GOARCH || in.Labels["org.opencontainers.image.revision"] == "" {
				t.Errorf("skopeo inspect %s: %+v", ref, in)
			}
		}
		// skopeo re-encodes the config and recompresses the layer on the
		// way from docker-archive to OCI, so the digests change: the image
		// must not — the same file system (diff IDs) and run config as the
		// OCI layout holds, read back by skopeo.
		copied := filepath.Join(t.TempDir(), "oci")
		skopeo("copy", "--quiet", "docker-archive:"+b.archive, "oci:"+copied+":"+ref)
		type config struct {
			Architecture, OS string
			Created          time.Time
			Config           struct {
				User       string
				Entrypoint []string
				Labels     map[string]string
			}
			RootFS struct {
				DiffIDs []string `json:"diff_ids"`
			} `json:"rootfs"`
		}
		var fromCopy, fromOurs config
		if err := json.Unmarshal(skopeo("inspect", "--config", "--raw", "oci:"+copied+":"+ref), &fromCopy); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(skopeo("inspect", "--config", "--raw", "oci:"+imagebuild.OCIDir(out)+":"+ref), &fromOurs); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fromCopy, fromOurs) || len(fromOurs.RootFS.DiffIDs) != 1 || fromOurs.Config.User != "65532:65532" {
			t.Errorf("skopeo copy docker-archive → oci of %s: config\n%+v\nthe OCI layout's\n%+v", ref, fromCopy, fromOurs)
		}
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no version", nil, 2, "usage: images --version VERSION"},
		{"argument", []string{"--version", "v1", "extra"}, 2, "usage:"},
		{"unknown flag", []string{"--nope"}, 2, "flag provided but not defined"},
		{"help", []string{"-h"}, 0, "-ca-bundle"},
		{"not a repository", []string{"--version", "v1", "--root", t.TempDir()}, 1, "git rev-parse HEAD"},
		{"bad tag", []string{"--version", "v1:2", "--out", t.TempDir(), "--go", "false"}, 1, "images: name of adapter"},
		{"unknown target", []string{"--version", "v1", "--out", t.TempDir(), "--targets", "kubelet", "--go", "false"}, 1, `unknown target "kubelet"`},
		{"missing CA bundle", []string{"--version", "v1", "--out", t.TempDir(), "--ca-bundle", "/nonexistent", "--go", "false"}, 1, "install the ca-certificates package"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, func(string) string { return "" }, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("images %v: exit %d, stderr:\n%s\nwant exit %d containing %q", tc.args, code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}
