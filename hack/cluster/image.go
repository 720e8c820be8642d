package cluster

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"time"
)

// ImageFile is one file of a one-layer image (WriteImageArchive).
type ImageFile struct {
	Path string // inside the image, without the leading slash
	Mode int64
	Data []byte
}

// WriteImageArchive writes a one-layer image as a docker-archive tar (the format of
// `docker save`, which `ctr images import` and so LoadImages read) named ref, running
// entrypoint. The real node's sandbox image is written so, and test images can be: no
// container engine or registry is needed.
func WriteImageArchive(w io.Writer, ref string, entrypoint []string, files []ImageFile) error {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	for _, f := range files {
		hdr := &tar.Header{Name: f.Path, Mode: f.Mode, Size: int64(len(f.Data)), Typeflag: tar.TypeReg,
			ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := lw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("image layer %s: %w", f.Path, err)
		}
		if _, err := lw.Write(f.Data); err != nil {
			return fmt.Errorf("image layer %s: %w", f.Path, err)
		}
	}
	if err := lw.Close(); err != nil {
		return err
	}
	layerDigest := sha256.Sum256(layer.Bytes())
	layerHex := hex.EncodeToString(layerDigest[:])
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": entrypoint},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerHex}},
	})
	if err != nil {
		return err
	}
	configDigest := sha256.Sum256(config)
	configName := hex.EncodeToString(configDigest[:]) + ".json"
	layerName := layerHex + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{ref}, "Layers": []string{layerName}}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, e := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerName, layer.Bytes()}, {"manifest.json", manifest}} {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("image archive %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return fmt.Errorf("image archive %s: %w", e.name, err)
		}
	}
	return tw.Close()
}
