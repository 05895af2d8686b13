//! The `vapcheck` binary.

fn main() {
    println!(
        "vapcheck {} (Kubernetes {})",
        env!("CARGO_PKG_VERSION"),
        vapcheck::KUBERNETES_VERSION
    );
}
