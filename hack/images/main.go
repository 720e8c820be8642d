// Command images builds metricscale's container images without a container
// engine (see README.md):
//
//	go run . --root ../.. --version v0.1.0 --out ../../_output/images
//
// `make images` runs it with the Makefile's VERSION.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/metricscale/metricscale/hack/images/imagebuild"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is the command with its arguments, environment and output, for tests.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "../..", "the metricscale repository (the main module)")
	version := fs.String("version", "", "release version: the images' tag and the binaries' --version (required; `make images` passes the Makefile's VERSION)")
	targets := fs.String("targets", "adapter,autoscaler,worker", "comma-separated images to build: adapter, autoscaler (./cmd/<target>), worker (./hack/worker)")
	arch := fs.String("arch", "amd64", "GOARCH of the binaries and architecture of the images")
	repository := fs.String("repository", "ghcr.io/metricscale", "registry and namespace of the image names")
	sourceURL := fs.String("source-url", "https://github.com/metricscale/metricscale", "org.opencontainers.image.source")
	license := fs.String("license", "", "SPDX identifier for org.opencontainers.image.licenses (default: detected from the licence file at --root; unset without one)")
	caBundle := fs.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle copied to /etc/ssl/certs/ca-certificates.crt in the images")
	out := fs.String("out", "../../_output/images", "output directory: <target>-<version>.tar docker archives and oci/")
	goCmd := fs.String("go", "go", "the go command")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *version == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: images --version VERSION [flags]; -h lists the flags")
		return 2
	}

	src, err := imagebuild.InspectSource(ctx, *root, getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	lic := *license
	if lic == "" {
		if lic, err = imagebuild.DetectLicense(src.Root); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	results, err := imagebuild.Build(ctx, imagebuild.Options{
		Source:     src,
		Version:    *version,
		Targets:    strings.Split(*targets, ","),
		Arch:       *arch,
		Repository: *repository,
		SourceURL:  *sourceURL,
		License:    lic,
		CABundle:   *caBundle,
		Out:        *out,
		Go:         *goCmd,
		Log:        stderr,
	})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, r := range results {
		fmt.Fprintf(stdout, "%s@%s  %.1f MB compressed  image ID %s  %s\n",
			r.Tag, r.Digest, float64(r.CompressedSize)/1e6, r.ConfigDigest, r.Archive)
	}
	fmt.Fprintf(stdout, "OCI layout: %s\n", imagebuild.OCIDir(*out))
	return 0
}
