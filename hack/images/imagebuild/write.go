package imagebuild

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// RefNameAnnotation names an image in an OCI layout's index.json.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// Tagged is an image and the name it goes by.
type Tagged struct {
	Tag   name.Tag
	Image v1.Image
}

// WriteDockerArchive writes img to path as a docker-archive tarball
// (manifest.json, the config, the gzipped layers), what docker load,
// podman load, kind load image-archive and ctr import read. It goes through
// a temporary file so that a failed build leaves no half tarball behind.
func WriteDockerArchive(path string, t Tagged) error {
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, t.Tag, t.Image); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("docker archive %s of %s: %w", path, t.Tag, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("docker archive %s of %s: %w", path, t.Tag, err)
	}
	return nil
}

// WriteOCILayout replaces dir with an OCI image layout holding images, each
// annotated in index.json with its full reference (for example
// ghcr.io/metricscale/adapter:v0.1.0) as org.opencontainers.image.ref.name:
// a tag alone would be ambiguous between the images, and containerd's
// import takes the full name.
func WriteOCILayout(dir string, images []Tagged) error {
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("oci layout %s: %w", dir, err)
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("oci layout %s: %w", dir, err)
	}
	for _, t := range images {
		ref := t.Tag.Name()
		if err := p.WriteImage(t.Image); err != nil {
			return fmt.Errorf("oci layout %s: %s: %w", dir, ref, err)
		}
		desc, err := partial.Descriptor(t.Image)
		if err != nil {
			return fmt.Errorf("oci layout %s: %s: %w", dir, ref, err)
		}
		// An image, not an artifact: go-containerregistry would name the
		// config's media type as artifactType, which image indexes omit.
		desc.ArtifactType = ""
		desc.Annotations = map[string]string{RefNameAnnotation: ref}
		if err := p.AppendDescriptor(*desc); err != nil {
			return fmt.Errorf("oci layout %s: %s: %w", dir, ref, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("oci layout %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("oci layout %s: %w", dir, err)
	}
	return nil
}

// ArchiveName is the docker-archive file of an image: adapter-v0.1.0.tar.
func ArchiveName(target, version string) string {
	return fmt.Sprintf("%s-%s.tar", target, version)
}

// OCIDir is the OCI layout under an output directory.
func OCIDir(out string) string { return filepath.Join(out, "oci") }
