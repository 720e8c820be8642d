package imagebuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Source is what the images are built from and labelled with.
type Source struct {
	// Root is the main module's directory (the repository root).
	Root string
	// Commit is the git commit of Root's HEAD.
	Commit string
	// Time stamps every file and the image config: SOURCE_DATE_EPOCH when
	// set, else the commit time — never the time of the build, which would
	// change the digest.
	Time time.Time
	// Dirty is set when the working tree differs from Commit: the images
	// then hold the uncommitted changes but carry Commit's name.
	Dirty bool
}

// InspectSource reads the commit and its time from git in root; getenv
// supplies SOURCE_DATE_EPOCH (os.Getenv, or a test's).
func InspectSource(ctx context.Context, root string, getenv func(string) string) (Source, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return Source{}, fmt.Errorf("source %s: %w", root, err)
	}
	s := Source{Root: abs}
	if s.Commit, err = git(ctx, abs, "rev-parse", "HEAD"); err != nil {
		return Source{}, err
	}
	if epoch := getenv("SOURCE_DATE_EPOCH"); epoch != "" {
		sec, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return Source{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
		}
		s.Time = time.Unix(sec, 0).UTC()
	} else {
		ct, err := git(ctx, abs, "log", "-1", "--format=%ct", "HEAD")
		if err != nil {
			return Source{}, err
		}
		sec, err := strconv.ParseInt(ct, 10, 64)
		if err != nil {
			return Source{}, fmt.Errorf("commit time %q of %s: %w", ct, s.Commit, err)
		}
		s.Time = time.Unix(sec, 0).UTC()
	}
	status, err := git(ctx, abs, "status", "--porcelain")
	if err != nil {
		return Source{}, err
	}
	s.Dirty = status != ""
	return s, nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// licenseFiles are the names a repository's licence goes by, in the order
// they are looked for.
var licenseFiles = []string{"LICENSE", "LICENSE.md", "LICENSE.txt", "COPYING"}

// DetectLicense returns the SPDX identifier of the licence file in root, ""
// when there is none, and an error when there is one it does not recognise
// (pass the identifier explicitly then).
func DetectLicense(root string) (string, error) {
	for _, name := range licenseFiles {
		text, err := os.ReadFile(filepath.Join(root, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("licence %s: %w", name, err)
		}
		if id := spdxOf(string(text)); id != "" {
			return id, nil
		}
		return "", fmt.Errorf("licence %s: not recognised as Apache-2.0, MIT or BSD-3-Clause; pass its SPDX identifier with --license", name)
	}
	return "", nil
}

// spdxOf recognises the licences a Go project is most likely to carry, by
// phrases only their texts contain.
func spdxOf(text string) string {
	switch {
	case strings.Contains(text, "Apache License") && strings.Contains(text, "Version 2.0"):
		return "Apache-2.0"
	case strings.Contains(text, "Permission is hereby granted, free of charge"):
		return "MIT"
	case strings.Contains(text, "Redistribution and use in source and binary forms") &&
		strings.Contains(text, "Neither the name of"):
		return "BSD-3-Clause"
	}
	return ""
}
