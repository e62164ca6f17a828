# A static slotsync binary in an empty image, running as an unprivileged user.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/slotsync ./cmd/slotsync

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/slotsync /slotsync
USER 65532:65532
EXPOSE 7461
ENTRYPOINT ["/slotsync"]
CMD ["run"]
