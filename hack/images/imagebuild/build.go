// Package imagebuild builds metricscale's container images without a
// container engine: the binaries with go build, the images with
// go-containerregistry, written as docker-archive tarballs and an OCI
// layout. Its output is reproducible: the same source, Go toolchain, CA
// bundle and version give the same digests.
package imagebuild

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Target is one image this tool knows how to build.
type Target struct {
	// Description is the image's org.opencontainers.image.description.
	Description string
	// Package is the main package, relative to the repository root.
	Package string
	// VersionPkg is the package whose Version and Commit the linker stamps:
	// cmd/internal/version for the released commands, "main" for a tool
	// outside cmd/ (which may not import cmd/internal).
	VersionPkg string
	// Release marks a product image: the Dockerfile builds it and
	// manifests/ deploy it. The worker is a test and demo workload only.
	Release bool
}

// Targets are the images this tool knows, by name: the binary's name in the
// image and the image's name in the repository.
var Targets = map[string]Target{
	"adapter": {
		Description: "metricscale adapter: custom.metrics.k8s.io and external.metrics.k8s.io (and optionally metrics.k8s.io) from pluggable providers",
		Package:     "./cmd/adapter", VersionPkg: versionPkg, Release: true,
	},
	"autoscaler": {
		Description: "metricscale autoscaler: the MetricAutoscaler controller, an HPA-compatible autoscaler",
		Package:     "./cmd/autoscaler", VersionPkg: versionPkg, Release: true,
	},
	"worker": {
		Description: "metricscale worker: the test and demo queue consumer of the development backends (hack/worker); not a release image",
		Package:     "./hack/worker", VersionPkg: "main",
	},
}

// Options of Build.
type Options struct {
	// Source is the inspected repository (InspectSource).
	Source Source
	// Version is the release version: the images' tag and the binaries'
	// --version.
	Version string
	// Targets are the images to build, keys of the Targets map.
	Targets []string
	// Arch is the GOARCH and the image architecture.
	Arch string
	// Repository prefixes the image names: ghcr.io/metricscale.
	Repository string
	// SourceURL is org.opencontainers.image.source.
	SourceURL string
	// License is org.opencontainers.image.licenses; unset when empty.
	License string
	// CABundle is the PEM file copied into the images.
	CABundle string
	// Out receives the docker-archive tarballs and the OCI layout.
	Out string
	// Go is the go command.
	Go string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Result is one built image.
type Result struct {
	Tag name.Tag
	// Digest is the manifest's: what a registry reports once the OCI layout
	// is pushed as is.
	Digest v1.Hash
	// ConfigDigest is the image ID docker and containerd show after a load.
	ConfigDigest v1.Hash
	// CompressedSize is the config and the gzipped layer: what a pull
	// transfers.
	CompressedSize int64
	// Archive is the docker-archive tarball.
	Archive string
}

// Build builds the images of o.Targets into o.Out.
func Build(ctx context.Context, o Options) ([]Result, error) {
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	targets := append([]string(nil), o.Targets...)
	sort.Strings(targets)
	if len(targets) == 0 {
		return nil, fmt.Errorf("images: no targets")
	}
	tags := map[string]name.Tag{}
	for _, t := range targets {
		if _, ok := Targets[t]; !ok {
			return nil, fmt.Errorf("images: unknown target %q", t)
		}
		tag, err := name.NewTag(fmt.Sprintf("%s/%s:%s", o.Repository, t, o.Version), name.StrictValidation)
		if err != nil {
			return nil, fmt.Errorf("images: name of %s: %w", t, err)
		}
		tags[t] = tag
	}
	caBundle, err := os.ReadFile(o.CABundle)
	if err != nil {
		return nil, fmt.Errorf("images: CA bundle: %w (install the ca-certificates package, or pass another PEM file)", err)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("images: output %s: %w", o.Out, err)
	}
	// Absolute: go build runs in the repository, not here.
	binDir, err := os.MkdirTemp(o.Out, ".bin-")
	if err == nil {
		binDir, err = filepath.Abs(binDir)
	}
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	defer os.RemoveAll(binDir)

	if o.Source.Dirty {
		logf("warning: %s has uncommitted changes; the images hold them but are labelled with commit %s", o.Source.Root, o.Source.Commit)
	}
	start := time.Now()
	if err := GoBuild(ctx, o.Go, o.Source, o.Version, o.Arch, binDir, targets); err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	logf("go build %v for linux/%s: %s", targets, o.Arch, time.Since(start).Round(time.Millisecond))

	var results []Result
	var tagged []Tagged
	for _, t := range targets {
		tag := tags[t]
		binary, err := os.ReadFile(filepath.Join(binDir, t))
		if err != nil {
			return nil, fmt.Errorf("images: binary of %s: %w", t, err)
		}
		img, err := Image(Spec{
			Name:     t,
			Binary:   binary,
			CABundle: caBundle,
			Arch:     o.Arch,
			Created:  o.Source.Time,
			Labels:   Labels(t, o),
		})
		if err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
		archive := filepath.Join(o.Out, ArchiveName(t, o.Version))
		if err := WriteDockerArchive(archive, Tagged{Tag: tag, Image: img}); err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
		r, err := describe(tag, img, archive)
		if err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
		results = append(results, r)
		tagged = append(tagged, Tagged{Tag: tag, Image: img})
	}
	if err := WriteOCILayout(OCIDir(o.Out), tagged); err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	return results, nil
}

// Labels are the OCI labels of target's image.
func Labels(target string, o Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "metricscale-" + target,
		"org.opencontainers.image.description": Targets[target].Description,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Source.Commit,
		"org.opencontainers.image.source":      o.SourceURL,
		"org.opencontainers.image.created":     o.Source.Time.UTC().Format(time.RFC3339),
	}
	if o.License != "" {
		l["org.opencontainers.image.licenses"] = o.License
	}
	return l
}

func describe(tag name.Tag, img v1.Image, archive string) (Result, error) {
	r := Result{Tag: tag, Archive: archive}
	var err error
	if r.Digest, err = img.Digest(); err != nil {
		return Result{}, fmt.Errorf("%s: digest: %w", tag, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return Result{}, fmt.Errorf("%s: manifest: %w", tag, err)
	}
	r.ConfigDigest = m.Config.Digest
	r.CompressedSize = m.Config.Size
	for _, l := range m.Layers {
		r.CompressedSize += l.Size
	}
	return r, nil
}
