#!/usr/bin/env bash
# Brings up the whole local stack on 127.0.0.1: the machine's RabbitMQ/MariaDB/PostgreSQL, Keystone and
# magnum-api 15.0.1 (Debian packages) with an OpenStack simulator (Glance/Nova/Neutron/Octavia), magnum-api 23.0.0 in a
# Debian forky chroot next to it, a Kubernetes management cluster with Cluster API (built from the Go
# module proxy), one bridge per magnum-api, and Horizon with magnum-ui on 127.0.0.1:8080. Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
ensure_dirs
t0=$SECONDS
# OpenTofu and terraform-provider-openstack (the Terraform end-to-end test's client) build, cached,
# at the lowest priority while the rest comes up; most of that time is spent waiting on services.
"$here/build-tofu.sh" >>"$MCB_LOG_DIR/build-tofu.log" 2>&1 &
tofu_build=$!
"$here/services.sh"
"$here/openstack/up.sh"
# Horizon + magnum-ui and the headless browser of the Horizon end-to-end test, in the background as
# well; after openstack/up.sh, whose apt run must not overlap another one's temporary policy-rc.d.
"$here/horizon-up.sh" >>"$MCB_LOG_DIR/horizon-up.log" 2>&1 &
horizon_up=$!
"$here/openstack/newest-up.sh"
"$here/mgmt-up.sh"
# CAPO (built, cached) reconciles the OpenStack-flavor clusters against the OpenStack simulator; the
# zed bridge's --check-config wants its CRDs.
"$here/build-k8s.sh" capo
MCB_SKIP_BUILD=1 "$here/capo-up.sh"
"$here/bridge-up.sh" zed
"$here/bridge-up.sh" newest
if ! wait "$tofu_build"; then
  tail -n 30 "$MCB_LOG_DIR/build-tofu.log" >&2
  log "ERROR: building OpenTofu failed (log: $MCB_LOG_DIR/build-tofu.log)"; exit 1
fi
if ! wait "$horizon_up"; then
  tail -n 30 "$MCB_LOG_DIR/horizon-up.log" >&2
  log "ERROR: bringing up Horizon failed (log: $MCB_LOG_DIR/horizon-up.log)"; exit 1
fi
log "local stack up in $((SECONDS - t0))s"
cat <<MSG

The stack is up. Try, as the demo tenant:

  openstack --os-cloud devstack coe cluster template create k8s-v1.36 \\
      --coe kubernetes --image ubuntu-2404-kube-v1.36.3 --external-network public \\
      --flavor m1.small --master-flavor m1.medium --keypair default
  openstack --os-cloud devstack coe cluster create demo --cluster-template k8s-v1.36 \\
      --master-count 1 --node-count 2
  openstack --os-cloud devstack coe cluster show demo -c status -c status_reason -c api_address
  mkdir -p ~/demo && openstack --os-cloud devstack coe cluster config demo --dir ~/demo
  KUBECONFIG=~/demo/config $(dirname "$(command -v kubectl 2>/dev/null || echo "${MCB_KUBECTL:-$MCB_BIN_DIR/kubectl}")")/kubectl get nodes

The same through magnum-api 23.0.0 (region RegionTwo; its magnumclient 5 has node labels/taints and
\`coe credential rotate\`):

  chroot /srv/magnum-forky openstack --os-cloud devstack-newest coe cluster template create k8s-v1.36 \\
      --coe kubernetes --image ubuntu-2404-kube-v1.36.3 --external-network public \\
      --flavor m1.small --master-flavor m1.medium --keypair default
  chroot /srv/magnum-forky openstack --os-cloud devstack-newest coe cluster create demo23 \\
      --cluster-template k8s-v1.36 --master-count 1 --node-count 2

Horizon (magnum-ui), as demo / secretdemo: http://127.0.0.1:8080/project/clusters/

Management cluster kubeconfig: $(make -s -C "$here/../.." kubeconfig 2>/dev/null || echo "$ADMIN_KUBECONFIG")
Logs: $MCB_LOG_DIR   PID files: $MCB_RUN_DIR   Stop: make down
MSG
