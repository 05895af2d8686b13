# Shared by e2e/cluster/{build,up,down}: paths, messages and the cached build.
# Sourced, not run. Everything it prints goes to stderr: `up` keeps stdout for the kubeconfig path.

CLUSTER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KUBE_VERSION="$(tr -d '[:space:]' <"$CLUSTER_DIR/kubernetes.version")"
VAPCHECK_CACHE="${VAPCHECK_CACHE:-$HOME/.cache/vapcheck}"
BIN_DIR="${VAPCHECK_BIN_DIR:-$VAPCHECK_CACHE/k8s-$KUBE_VERSION/bin}"
INSTANCES_DIR="$VAPCHECK_CACHE/instances"

# The binaries every instance needs; kubectl is built only on request (build --with-kubectl).
CONTROL_PLANE_BINARIES=(etcd clustertool kube-apiserver kube-controller-manager)

log() { printf '%s: %s\n' "${SCRIPT_NAME:-cluster}" "$*" >&2; }
die() {
	printf '%s: error: %s\n' "${SCRIPT_NAME:-cluster}" "$*" >&2
	exit 1
}

now_s() { date +%s; }

# Fingerprint of everything the binaries are built from. Content, not mtimes: a fresh clone
# has new mtimes but must still reuse the cached binaries.
source_fingerprint() {
	(
		cd "$CLUSTER_DIR" &&
			find go.mod go.sum kubernetes.version cmd -type f \( -name '*.go' -o -name 'go.*' -o -name '*.version' \) -print |
			LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1
	)
}

# Go's -ldflags that stamp the release into the binaries (what `kubectl version` and /version
# report), the same variables the Kubernetes release build sets (hack/lib/version.sh). The build
# below also links with `-s -w` (no symbol table, no DWARF), as the release build does when not
# debugging (hack/lib/golang.sh, `goldflags`), which leaves the linker less to write (not timed here).
version_ldflags() {
	local major="${KUBE_VERSION%%.*}" rest="${KUBE_VERSION#*.}"
	local minor="${rest%%.*}" flags="" pkg
	for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
		flags+=" -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
		flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	printf '%s' "${flags# }"
}

require_go() {
	command -v go >/dev/null 2>&1 ||
		die "'go' was not found on PATH. The control plane is built from the Kubernetes $KUBE_VERSION Go modules; install Go (the version in e2e/cluster/go.mod or newer) and put it on PATH, or point VAPCHECK_BIN_DIR at prebuilt binaries."
}

# ensure_binaries [--with-kubectl]: build the control plane into $BIN_DIR unless the binaries
# there were built from the same sources. Serialised with a lock so that parallel `up`s build once.
ensure_binaries() {
	local want=("${CONTROL_PLANE_BINARIES[@]}") pkgs
	[[ "${1:-}" == "--with-kubectl" ]] && want+=(kubectl)
	local stamp="$BIN_DIR/.fingerprint" fp
	fp="$(source_fingerprint)"
	up_to_date() {
		[[ -f "$stamp" && "$(cat "$stamp")" == "$fp" ]] || return 1
		local b
		for b in "${want[@]}"; do [[ -x "$BIN_DIR/$b" ]] || return 1; done
	}
	up_to_date && return 0
	if [[ -n "${VAPCHECK_BIN_DIR:-}" ]]; then
		# Prebuilt binaries chosen by the caller: use them as they are, never build there.
		local b
		for b in "${want[@]}"; do
			[[ -x "$BIN_DIR/$b" ]] || die "VAPCHECK_BIN_DIR=$BIN_DIR has no executable '$b' (needed: ${want[*]})"
		done
		return 0
	fi

	mkdir -p "$BIN_DIR"
	exec 9>"$BIN_DIR/.lock"
	if command -v flock >/dev/null 2>&1; then
		flock 9
		# Another process may have finished the build while we waited.
		up_to_date && {
			exec 9>&-
			return 0
		}
	fi
	require_go

	pkgs=(./cmd/etcd ./cmd/clustertool k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)
	[[ " ${want[*]} " == *" kubectl "* ]] && pkgs+=(k8s.io/kubernetes/cmd/kubectl)
	local tmp="$BIN_DIR/.new.$$" buildlog="$(dirname "$BIN_DIR")/build.log" start=$SECONDS
	rm -rf "$tmp" && mkdir -p "$tmp"
	log "building Kubernetes $KUBE_VERSION (${want[*]}) into $BIN_DIR"
	log "  a cold build needs about 13 CPU-minutes (44 minutes measured on 2 cores busy with other builds); later builds reuse Go's build cache (log: $buildlog)"
	if ! (cd "$CLUSTER_DIR" && CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false}" \
		go build -ldflags "-s -w $(version_ldflags)" -o "$tmp/" "${pkgs[@]}") >"$buildlog" 2>&1; then
		tail -n 40 "$buildlog" >&2
		rm -rf "$tmp"
		die "go build failed (full log: $buildlog)"
	fi
	local b
	# A kubectl from older sources must not survive under the new fingerprint.
	[[ " ${want[*]} " == *" kubectl "* ]] || rm -f "$BIN_DIR/kubectl"
	for b in "$tmp"/*; do mv -f "$b" "$BIN_DIR/"; done
	rmdir "$tmp"
	printf '%s\n' "$fp" >"$stamp"
	log "built in $((SECONDS - start))s"
	exec 9>&-
}
