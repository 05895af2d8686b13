# vapcheck container images. Two targets, both running as user 65532 with no shell and no
# package manager (docs/image.md):
#
# - the default (the last stage), with a registry to pull from:
#     docker build -t vapcheck:0.1.0 .        (or podman build / buildah build)
#   builds the binary in rust:1.95-bookworm with `cargo build --release --locked` (the sources
#   and Cargo.lock CI tests, but CI tests debug builds of them, not this binary) and puts it on
#   distroless/cc-debian12 (glibc, CA certificates, user nonroot). Not built by CI: CI has no
#   registry to pull the two base images from.
#
# - `scratch`, which pulls nothing: `make image` (scripts/build-image) builds a static musl
#   binary on the host and runs
#     buildah build --target scratch --build-context static=ROOTFS -t vapcheck:0.1.0 .
#   where ROOTFS holds usr/local/bin/vapcheck, etc/ssl/certs/ca-certificates.crt, etc/passwd,
#   etc/group and tmp/. This is the image CI builds, unpacks and runs as uid 65532 with a
#   read-only root against a real API server (`cargo test --test e2e -- --group image`).

FROM rust:1.95-bookworm AS build
WORKDIR /src
# The whole repository minus .dockerignore (target/, .git/): every path Cargo.toml names
# (benches, tests, e2e/cluster/kubernetes.version read by include_str!) is present.
COPY . .
RUN cargo build --release --locked --bin vapcheck \
 && install -D -m 0755 target/release/vapcheck /out/vapcheck

# Nothing but the root filesystem of the build context `static` (see above); the binary is
# static, so there is no dynamic loader or libc in the image.
FROM scratch AS scratch
COPY --from=static / /
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/vapcheck"]
CMD ["controller"]

# glibc (bookworm, like the build image), CA certificates, user 65532 "nonroot".
FROM gcr.io/distroless/cc-debian12:nonroot AS distroless
COPY --from=build /out/vapcheck /usr/local/bin/vapcheck
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/vapcheck"]
CMD ["controller"]
