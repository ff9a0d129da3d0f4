# rl-exporter as a container: a static binary on a distroless base, run as
# a non-root user. docker-compose.yml builds it for every rl-exporter
# service of the demo stack (serve, demo-upstream, alert-sink, traffic).
#
#   docker build -t rl-exporter .
#   docker run --rm -p 8480:8480 rl-exporter serve --listen 0.0.0.0:8480

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so a change of code does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" \
      -o /out/rl-exporter ./cmd/rl-exporter \
 && /out/rl-exporter version

# static-debian12 has no shell and no libc: the binary is static
# (CGO_ENABLED=0). Its nonroot user is uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/rl-exporter /usr/local/bin/rl-exporter
USER 65532:65532
EXPOSE 8480
ENTRYPOINT ["/usr/local/bin/rl-exporter"]
CMD ["serve", "--listen", "0.0.0.0:8480"]
