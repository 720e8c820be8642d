package imagebuild

import (
	"archive/tar"
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"
)

// NonRoot is the user and group the images run as: distroless' "nonroot",
// numeric so that Kubernetes' runAsNonRoot can verify it without a passwd
// lookup.
const NonRoot = 65532

// CABundlePath is where Go's crypto/x509 looks first on Linux.
const CABundlePath = "etc/ssl/certs/ca-certificates.crt"

// File is one entry of an image's file system. Paths are relative (no
// leading slash), as in an image layer.
type File struct {
	Path     string
	Dir      bool
	Mode     int64
	UID, GID int
	Body     []byte
}

// BaseFiles is everything of an image but its binary: the CA bundle, a
// passwd and group naming root and nonroot, nonroot's home and a /tmp.
func BaseFiles(caBundle []byte) []File {
	dir := func(p string, mode int64, id int) File { return File{Path: p, Dir: true, Mode: mode, UID: id, GID: id} }
	file := func(p string, body string) File { return File{Path: p, Mode: 0o644, Body: []byte(body)} }
	return []File{
		dir("etc", 0o755, 0),
		dir("etc/ssl", 0o755, 0),
		dir("etc/ssl/certs", 0o755, 0),
		{Path: CABundlePath, Mode: 0o644, Body: caBundle},
		file("etc/passwd", fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot)),
		file("etc/group", fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRoot)),
		dir("home", 0o755, 0),
		dir("home/nonroot", 0o700, NonRoot),
		dir("root", 0o700, 0),
		dir("tmp", 0o1777, 0),
	}
}

// Tar writes files as an uncompressed layer, reproducibly: entries sorted by
// path, every timestamp mtime, owners and modes as given, no user or group
// names, USTAR headers (nothing of the host in PAX records).
func Tar(files []File, mtime time.Time) ([]byte, error) {
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	seen := map[string]bool{}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range sorted {
		if f.Path == "" || strings.HasPrefix(f.Path, "/") || path.Clean(f.Path) != f.Path {
			return nil, fmt.Errorf("layer entry %q: want a clean relative path", f.Path)
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("layer entry %q: twice", f.Path)
		}
		seen[f.Path] = true
		if parent := path.Dir(f.Path); parent != "." && !seen[parent] {
			return nil, fmt.Errorf("layer entry %q: its directory %q is not in the layer", f.Path, parent)
		}
		hdr := &tar.Header{
			Name:    f.Path,
			Mode:    f.Mode,
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: mtime.UTC().Truncate(time.Second),
			Format:  tar.FormatUSTAR,
		}
		if f.Dir {
			hdr.Typeflag, hdr.Name = tar.TypeDir, f.Path+"/"
		} else {
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer entry %q: %w", f.Path, err)
		}
		if _, err := tw.Write(f.Body); err != nil {
			return nil, fmt.Errorf("layer entry %q: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}
