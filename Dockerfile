# vapcheck container image. Build: docker build -t vapcheck:0.1.0 .
#
# The binary is built exactly as CI builds and tests it: same sources, same Cargo.lock,
# `cargo build --release --locked`. The runtime image has no shell and no package manager.

FROM rust:1.95-bookworm AS build
WORKDIR /src
# The whole repository minus .dockerignore (target/, .git/): every path Cargo.toml names
# (benches, tests, e2e/cluster/kubernetes.version read by include_str!) is present.
COPY . .
RUN cargo build --release --locked --bin vapcheck \
 && install -D -m 0755 target/release/vapcheck /out/vapcheck

# glibc (bookworm, like the build image), CA certificates, user 65532 "nonroot".
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/vapcheck /usr/local/bin/vapcheck
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/vapcheck"]
CMD ["controller"]
