package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

func readTar(t *testing.T, b []byte) []*tar.Header {
	t.Helper()
	var hdrs []*tar.Header
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, h)
	}
}

func TestTarIsReproducible(t *testing.T) {
	t.Parallel()
	mtime := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	files := append(BaseFiles([]byte("CA")), File{Path: "adapter", Mode: 0o755, Body: []byte("binary")})
	a, err := Tar(files, mtime)
	if err != nil {
		t.Fatal(err)
	}
	// The same files in another order, and a time in another zone with
	// nanoseconds: the same bytes.
	reversed := append([]File(nil), files...)
	for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
		reversed[i], reversed[j] = reversed[j], reversed[i]
	}
	b, err := Tar(reversed, mtime.In(time.FixedZone("X", 3600)).Add(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("Tar of the same files in another order differs")
	}
	hdrs := readTar(t, a)
	var names []string
	for _, h := range hdrs {
		names = append(names, h.Name)
		if !h.ModTime.Equal(mtime) || h.Uname != "" || h.Gname != "" || h.Format != tar.FormatUSTAR {
			t.Errorf("%s: mtime %v uname %q gname %q format %v, want %v, no names, USTAR", h.Name, h.ModTime, h.Uname, h.Gname, h.Format, mtime)
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("entries not sorted: %v", names)
	}
}

func TestBaseFiles(t *testing.T) {
	t.Parallel()
	b, err := Tar(BaseFiles([]byte("PEM")), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*tar.Header{}
	for _, h := range readTar(t, b) {
		got[h.Name] = h
	}
	tests := []struct {
		name     string
		typ      byte
		mode     int64
		uid, gid int
	}{
		{"etc/ssl/certs/ca-certificates.crt", tar.TypeReg, 0o644, 0, 0},
		{"etc/passwd", tar.TypeReg, 0o644, 0, 0},
		{"etc/group", tar.TypeReg, 0o644, 0, 0},
		{"home/nonroot/", tar.TypeDir, 0o700, NonRoot, NonRoot},
		{"tmp/", tar.TypeDir, 0o1777, 0, 0},
	}
	for _, tc := range tests {
		h := got[tc.name]
		if h == nil {
			t.Errorf("%s: missing", tc.name)
			continue
		}
		if h.Typeflag != tc.typ || h.Mode != tc.mode || h.Uid != tc.uid || h.Gid != tc.gid {
			t.Errorf("%s: type %c mode %o owner %d:%d, want %c %o %d:%d", tc.name, h.Typeflag, h.Mode, h.Uid, h.Gid, tc.typ, tc.mode, tc.uid, tc.gid)
		}
	}
	files := map[string]string{}
	for _, f := range BaseFiles([]byte("PEM")) {
		files[f.Path] = string(f.Body)
	}
	if files[CABundlePath] != "PEM" {
		t.Errorf("CA bundle = %q, want the given PEM", files[CABundlePath])
	}
	if !strings.Contains(files["etc/passwd"], "\nnonroot:x:65532:65532:") || !strings.Contains(files["etc/group"], "\nnonroot:x:65532:") {
		t.Errorf("passwd/group without nonroot 65532:\n%s\n%s", files["etc/passwd"], files["etc/group"])
	}
}

func TestTarRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files []File
		want  string
	}{
		{"absolute", []File{{Path: "/etc", Dir: true}}, "clean relative path"},
		{"unclean", []File{{Path: "etc/../x"}}, "clean relative path"},
		{"twice", []File{{Path: "x"}, {Path: "x"}}, "twice"},
		{"no parent", []File{{Path: "etc/passwd"}}, `directory "etc"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Tar(tc.files, time.Unix(0, 0))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Tar(%v) error %v, want %q", tc.files, err, tc.want)
			}
		})
	}
}

func TestSPDX(t *testing.T) {
	t.Parallel()
	tests := []struct{ text, want string }{
		{"                                 Apache License\n                           Version 2.0, January 2004", "Apache-2.0"},
		{"MIT License\n\nPermission is hereby granted, free of charge, to any person", "MIT"},
		{"Redistribution and use in source and binary forms ... 3. Neither the name of the copyright holder", "BSD-3-Clause"},
		{"All rights reserved.", ""},
	}
	for _, tc := range tests {
		if got := spdxOf(tc.text); got != tc.want {
			t.Errorf("spdxOf(%.30q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestLabels(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	o := Options{Source: Source{Commit: "abc", Time: created}, Version: "v1.2.3", SourceURL: "https://example.com/x"}
	want := map[string]string{
		"org.opencontainers.image.title":       "metricscale-adapter",
		"org.opencontainers.image.description": Targets["adapter"].Description,
		"org.opencontainers.image.version":     "v1.2.3",
		"org.opencontainers.image.revision":    "abc",
		"org.opencontainers.image.source":      "https://example.com/x",
		"org.opencontainers.image.created":     "2026-01-02T02:04:05Z",
	}
	if got := Labels("adapter", o); !reflect.DeepEqual(got, want) {
		t.Errorf("Labels without a licence = %v, want %v", got, want)
	}
	o.License = "Apache-2.0"
	want["org.opencontainers.image.licenses"] = "Apache-2.0"
	if got := Labels("adapter", o); !reflect.DeepEqual(got, want) {
		t.Errorf("Labels with a licence = %v, want %v", got, want)
	}
}
