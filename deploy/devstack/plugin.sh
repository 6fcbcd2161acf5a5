#!/usr/bin/env bash
# devstack plugin of magnum-capi-bridge: installs the bridge in place of magnum-conductor.
# The functions below are also what the local stack's deploy/local/bridge-up.sh runs (with small
# stand-ins for devstack's own iniset/run_process, use_devstack_shims in deploy/local/lib.sh), so CI exercises
# them on every `make up`.

# install_magnum_capi_bridge: the binary and the driver registration magnum-api validates against.
function install_magnum_capi_bridge {
    if [[ "$MAGNUM_CAPI_BRIDGE_BUILD" == "True" ]]; then
        echo_summary "Building magnum-capi-bridge into $MAGNUM_CAPI_BRIDGE_BIN"
        (cd "$MAGNUM_CAPI_BRIDGE_DIR" && CGO_ENABLED=0 go build -trimpath \
            -ldflags "-X main.version=$(git describe --tags --match 'v[0-9]*' --always --dirty 2>/dev/null || echo dev) -X main.commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" \
            -o "$MAGNUM_CAPI_BRIDGE_BIN.new" ./cmd/magnum-capi-bridge) || die $LINENO "cannot build magnum-capi-bridge"
        mv "$MAGNUM_CAPI_BRIDGE_BIN.new" "$MAGNUM_CAPI_BRIDGE_BIN"
    fi
    [[ -x "$MAGNUM_CAPI_BRIDGE_BIN" ]] || die $LINENO "no magnum-capi-bridge binary at $MAGNUM_CAPI_BRIDGE_BIN"
    # magnum-api looks the driver up by (server_type, os, coe); the package is tiny and has no
    # dependencies. Idempotent: an unchanged copy is left alone.
    echo_summary "Installing the magnum-capi-bridge driver registration for magnum-api"
    "${PYTHON:-python3}" "$MAGNUM_CAPI_BRIDGE_DIR/deploy/magnum-driver/install.py" || die $LINENO "cannot install the magnum driver"
}

# configure_magnum_capi_bridge_kubernetes: the bridge's CRDs (the tenant API's MagnumCluster),
# ServiceAccount, RBAC and admission policies (and the cluster-autoscalers' PriorityClass) in the
# management cluster, and a kubeconfig with a token of that ServiceAccount (renewed when less
# than 15 of its 30 days are left; client-go re-reads the token file, so no restart is needed).
# The bridge renders its ClusterClasses itself, per project namespace; what they need beyond that
# (Cluster API core, kubeadm and the infrastructure provider) --check-config verifies.
function configure_magnum_capi_bridge_kubernetes {
    local admin=$MAGNUM_CAPI_BRIDGE_ADMIN_KUBECONFIG kubeconfig=$MAGNUM_CAPI_BRIDGE_KUBECONFIG
    [[ -s "$admin" ]] || die $LINENO "MAGNUM_CAPI_BRIDGE_ADMIN_KUBECONFIG ($admin) is not a kubeconfig of the management cluster"
    local k=("$MAGNUM_CAPI_BRIDGE_KUBECTL" --kubeconfig "$admin" --request-timeout=30s)
    # The tenant API's CRD (MagnumCluster; the chart's crds/, which Helm installs) first: the RBAC
    # names its resources, and the bridge watches them as soon as [bridge] tenant_api is on.
    echo_summary "Applying the CustomResourceDefinitions of magnum-capi-bridge"
    local crds=() crd
    for crd in "$MAGNUM_CAPI_BRIDGE_DIR"/deploy/helm/magnum-capi-bridge/crds/*.yaml; do crds+=(-f "$crd"); done
    "${k[@]}" apply --server-side --field-manager=magnum-capi-bridge-deploy --force-conflicts "${crds[@]}" >/dev/null \
        || die $LINENO "cannot apply deploy/helm/magnum-capi-bridge/crds"
    # (Without --request-timeout: the wait is a watch, bounded by its own --timeout.)
    "$MAGNUM_CAPI_BRIDGE_KUBECTL" --kubeconfig "$admin" wait --for=condition=Established \
        crd/magnumclusters.coe.magnum.openstack.org --timeout=60s >/dev/null \
        || die $LINENO "the CRD magnumclusters.coe.magnum.openstack.org is not Established"
    echo_summary "Applying the RBAC and admission policies of magnum-capi-bridge"
    "${k[@]}" apply --server-side --field-manager=magnum-capi-bridge-deploy --force-conflicts \
        -f "$MAGNUM_CAPI_BRIDGE_DIR/deploy/kubernetes/rbac.yaml" \
        -f "$MAGNUM_CAPI_BRIDGE_DIR/deploy/kubernetes/admission-policy.yaml" \
        -f "$MAGNUM_CAPI_BRIDGE_DIR/deploy/kubernetes/priority-class.yaml" >/dev/null || die $LINENO "cannot apply deploy/kubernetes"
    _magnum_capi_bridge_dir "$(dirname "$kubeconfig")"
    local token=${kubeconfig%.kubeconfig}.token
    if [[ $(_magnum_capi_bridge_token_expiry "$token") -lt $(($(date +%s) + 15 * 86400)) ]]; then
        (umask 077 && "${k[@]}" -n magnum-capi-bridge create token magnum-capi-bridge --duration=720h >"$token.new") \
            || die $LINENO "cannot issue a token for ServiceAccount magnum-capi-bridge"
        mv "$token.new" "$token"
        echo_summary "Issued a 30-day token for ServiceAccount magnum-capi-bridge/magnum-capi-bridge"
    fi
    local server ca
    server=$("${k[@]}" config view --minify --flatten -o jsonpath='{.clusters[0].cluster.server}')
    ca=$("${k[@]}" config view --minify --flatten -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
    (
        umask 077
        cat >"$kubeconfig.new" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: magnum-capi-bridge-mgmt
  cluster:
    server: $server
    certificate-authority-data: $ca
users:
- name: magnum-capi-bridge
  user:
    tokenFile: $token
contexts:
- name: magnum-capi-bridge
  context:
    cluster: magnum-capi-bridge-mgmt
    user: magnum-capi-bridge
current-context: magnum-capi-bridge
KUBECONFIG
    )
    if cmp -s "$kubeconfig.new" "$kubeconfig"; then rm -f "$kubeconfig.new"; else mv "$kubeconfig.new" "$kubeconfig"; fi
}

# _magnum_capi_bridge_dir DIR: creates DIR for the stack user; an existing one is left as it is.
function _magnum_capi_bridge_dir {
    [[ -d "$1" ]] || sudo install -d -o "${STACK_USER:-$(id -un)}" -m 0755 "$1"
}

# _magnum_capi_bridge_token_expiry FILE: the token's exp claim (seconds since the epoch), 0 when unreadable.
function _magnum_capi_bridge_token_expiry {
    local payload
    [[ -s "$1" ]] || { echo 0; return; }
    payload=$(cut -d. -f2 <"$1" | tr '_-' '/+') || { echo 0; return; }
    while [[ $((${#payload} % 4)) != 0 ]]; do payload+='='; done
    echo "$payload" | base64 -d 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["exp"])' 2>/dev/null || echo 0
}

# configure_magnum_capi_bridge: the [bridge] section (and [DEFAULT] host) in the bridge's own file,
# read after magnum.conf.
function configure_magnum_capi_bridge {
    local conf=${1:-$MAGNUM_CAPI_BRIDGE_CONF}
    echo_summary "Writing the [bridge] section of magnum-capi-bridge to $conf"
    _magnum_capi_bridge_dir "$(dirname "$conf")"
    if [[ -n "$MAGNUM_CAPI_BRIDGE_HOST" ]]; then
        iniset "$conf" DEFAULT host "$MAGNUM_CAPI_BRIDGE_HOST"
    fi
    iniset "$conf" bridge kubeconfig "$MAGNUM_CAPI_BRIDGE_KUBECONFIG"
    iniset "$conf" bridge namespace_prefix "$MAGNUM_CAPI_BRIDGE_NAMESPACE_PREFIX"
    iniset "$conf" bridge default_infrastructure "$MAGNUM_CAPI_BRIDGE_INFRASTRUCTURE"
    iniset "$conf" bridge allowed_infrastructures "${MAGNUM_CAPI_BRIDGE_ALLOWED_INFRASTRUCTURES:-$MAGNUM_CAPI_BRIDGE_INFRASTRUCTURE}"
    iniset "$conf" bridge default_kubernetes_version "$MAGNUM_CAPI_BRIDGE_KUBERNETES_VERSION"
    # Per-cluster Keystone application credentials (always on for openstack machines).
    iniset "$conf" bridge cluster_credentials True
    if [[ -n "$MAGNUM_CAPI_BRIDGE_MAGNUM_RELEASE" ]]; then
        iniset "$conf" bridge magnum_release "$MAGNUM_CAPI_BRIDGE_MAGNUM_RELEASE"
    fi
}

# magnum_capi_bridge_command: the command line run_process starts.
function magnum_capi_bridge_command {
    echo "$MAGNUM_CAPI_BRIDGE_BIN --config-file $MAGNUM_CAPI_BRIDGE_MAGNUM_CONF --config-file $MAGNUM_CAPI_BRIDGE_CONF"
}

# start_magnum_capi_bridge: checks every dependency first (--check-config names the first that
# fails), then runs the bridge as a devstack service.
function start_magnum_capi_bridge {
    echo_summary "Checking the configuration of magnum-capi-bridge"
    $(magnum_capi_bridge_command) --check-config || die $LINENO "magnum-capi-bridge --check-config failed"
    echo_summary "Starting magnum-capi-bridge as the service $MAGNUM_CAPI_BRIDGE_SERVICE"
    run_process "$MAGNUM_CAPI_BRIDGE_SERVICE" "$(magnum_capi_bridge_command)"
}

function stop_magnum_capi_bridge {
    stop_process "$MAGNUM_CAPI_BRIDGE_SERVICE"
}

function cleanup_magnum_capi_bridge {
    rm -f "$MAGNUM_CAPI_BRIDGE_CONF" "$MAGNUM_CAPI_BRIDGE_KUBECONFIG" "${MAGNUM_CAPI_BRIDGE_KUBECONFIG%.kubeconfig}.token"
}

# devstack's phases. Sourced without arguments (as deploy/local does), only the functions are defined.
if is_service_enabled magnum-capi-bridge 2>/dev/null && [[ $# -gt 0 ]]; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        install_magnum_capi_bridge
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        configure_magnum_capi_bridge_kubernetes
        configure_magnum_capi_bridge "$MAGNUM_CAPI_BRIDGE_CONF"
    elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
        start_magnum_capi_bridge
    fi
    if [[ "$1" == "unstack" ]]; then
        stop_magnum_capi_bridge
    fi
    if [[ "$1" == "clean" ]]; then
        cleanup_magnum_capi_bridge
    fi
fi
