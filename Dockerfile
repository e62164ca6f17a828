# A static slotsync binary in an empty image, running as an unprivileged user.
# The build stage runs on the builder's platform and cross-compiles for the target one, so one
# Dockerfile gives the amd64 and arm64 images without emulation (docker buildx --platform).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS=linux
ARG TARGETARCH
# The release's build tags (.goreleaser.yaml): urfave_cli_no_docs, the sidecar never renders its
# own man page (one less dependency tree); nethttpomithttp2, its HTTP endpoints are plain
# HTTP/1.1 (Go serves HTTP/2 only over TLS, which they do not use), so net/http's bundled HTTP/2
# is dead weight.
RUN mkdir -p /out/state && CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -tags urfave_cli_no_docs,nethttpomithttp2 -ldflags "-s -w -X main.version=${VERSION}" -o /out/slotsync ./cmd/slotsync

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/slotsync /slotsync
# The state directory, owned by the user slotsync runs as: a named volume mounted there (compose)
# starts with this ownership, so the journal can be written.
COPY --from=build --chown=65532:65532 /out/state /var/lib/slotsync
USER 65532:65532
EXPOSE 7461
ENTRYPOINT ["/slotsync"]
CMD ["run"]
