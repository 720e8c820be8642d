# syntax=docker/dockerfile:1
#
# metricscale's images, for those who build with Docker (BuildKit) or Podman.
# `make images` builds the same images without any container engine and is
# what the project tests and releases; see hack/images/README.md. This file is
# not built in CI (there is no engine there): hack/images' TestDockerfile only
# checks it agrees with `make images` (linker flags, user, files, entrypoints).
#
#   docker build --build-arg TARGET=adapter --build-arg VERSION=v0.1.0 \
#     --build-arg COMMIT=$(git rev-parse HEAD) -t ghcr.io/metricscale/adapter:v0.1.0 .
#
# TARGET is adapter or autoscaler (./cmd/TARGET).

ARG TARGET=adapter

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGET
ARG VERSION=dev
ARG COMMIT=
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN case "$TARGET" in adapter|autoscaler) ;; *) echo "TARGET must be adapter or autoscaler, not '$TARGET'" >&2; exit 1 ;; esac
# Static, without this machine's paths or VCS state: the same flags as
# hack/images (imagebuild.LDFlags).
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux GOARCH=$TARGETARCH GOFLAGS= \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/metricscale/metricscale/cmd/internal/version.Version=$VERSION -X github.com/metricscale/metricscale/cmd/internal/version.Commit=$COMMIT" \
      -o /rootfs/$TARGET ./cmd/$TARGET
# The rest of the file system, as imagebuild.BaseFiles: the CA bundle, root
# and nonroot (65532) in passwd and group, nonroot's home, /tmp.
RUN mkdir -p /rootfs/etc/ssl/certs /rootfs/home/nonroot /rootfs/root /rootfs/tmp \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ca-certificates.crt \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /rootfs/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' > /rootfs/etc/group \
 && chown 65532:65532 /rootfs/home/nonroot \
 && chmod 0700 /rootfs/home/nonroot /rootfs/root \
 && chmod 1777 /rootfs/tmp

# One final stage per command: an exec-form ENTRYPOINT cannot use an ARG.
FROM scratch AS adapter
COPY --from=build /rootfs/ /
ENTRYPOINT ["/adapter"]

FROM scratch AS autoscaler
COPY --from=build /rootfs/ /
ENTRYPOINT ["/autoscaler"]

FROM ${TARGET}
ARG TARGET
ARG VERSION=dev
ARG COMMIT=
USER 65532:65532
LABEL org.opencontainers.image.title="metricscale-${TARGET}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="https://github.com/metricscale/metricscale"
