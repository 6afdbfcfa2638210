# syntax=docker/dockerfile:1
# `slidelog serve`, an Envoy rate-limit service (gRPC ShouldRateLimit) with
# exact sliding windows, as an image (deploy/README.md):
#
#   docker build -t slidelog .
#   mkdir -p config && cp examples/envoy/ratelimit.yaml config/
#   docker run --rm -p 8081:8081 -p 8080:8080 -p 9102:9102 -v "$PWD/config:/config:ro" slidelog
#
# deploy/check runs the build stage's RUN commands and checks the rest.

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
# The binary is copied out of the cached target dir within the same RUN.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p slidelog-cli --bin slidelog \
    && install -D target/release/slidelog out/slidelog

# glibc, libgcc and CA certificates (for `rediss://`), no shell.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/out/slidelog /usr/local/bin/slidelog
# distroless's nonroot user, by number: Kubernetes verifies runAsNonRoot
# only for a numeric user.
USER 65532:65532
# gRPC (ShouldRateLimit, health), HTTP (/json, /healthcheck), Prometheus.
EXPOSE 8081 8080 9102
ENTRYPOINT ["/usr/local/bin/slidelog", "serve"]
CMD ["--config", "/config", "--grpc", "0.0.0.0:8081", "--http", "0.0.0.0:8080", "--metrics", "0.0.0.0:9102"]
