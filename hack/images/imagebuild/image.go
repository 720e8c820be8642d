package imagebuild

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec describes one image: a single static binary on an empty base.
type Spec struct {
	// Name is the binary's name; it lies at /<Name> and is the entrypoint.
	Name   string
	Binary []byte
	// CABundle becomes /etc/ssl/certs/ca-certificates.crt.
	CABundle []byte
	Arch     string
	// Created stamps the files, the config and its history.
	Created time.Time
	// Labels go into the config, and as annotations onto the manifest
	// (where registries such as GHCR read org.opencontainers.image.source).
	Labels map[string]string
}

// User is the image's USER: nonroot, numeric.
var User = strconv.Itoa(NonRoot) + ":" + strconv.Itoa(NonRoot)

// Image assembles the image of spec: one layer, OCI media types.
func Image(spec Spec) (v1.Image, error) {
	files := append(BaseFiles(spec.CABundle), File{Path: spec.Name, Mode: 0o755, Body: spec.Binary})
	rootfs, err := Tar(files, spec.Created)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Name, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(rootfs)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("image %s: layer: %w", spec.Name, err)
	}
	created := v1.Time{Time: spec.Created.UTC()}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   created,
			CreatedBy: "metricscale hack/images: /" + spec.Name + ", CA certificates, user nonroot",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Name, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", spec.Name, err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = "linux", spec.Arch, created
	cfg.Config = v1.Config{
		Entrypoint: []string{"/" + spec.Name},
		User:       User,
		WorkingDir: "/",
		Labels:     spec.Labels,
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, fmt.Errorf("image %s: config: %w", spec.Name, err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return mutate.Annotations(img, spec.Labels).(v1.Image), nil
}
