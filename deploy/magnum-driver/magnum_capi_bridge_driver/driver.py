"""The magnum-api side of magnum-capi-bridge.

magnum-api refuses a cluster template unless some ``magnum.drivers`` entry point provides the
template's ``(server_type, cluster_distro, coe)``; from magnum 20.0.0 on it also asks that driver to
validate master counts. The conductor work (creating, resizing, deleting clusters) is done by the Go
service magnum-capi-bridge, which consumes magnum-api's RPC instead of the Python magnum-conductor.
So this driver only answers the API's questions. Every method that would need a cloud raises
NotSupported, so that a Python magnum-conductor started by mistake fails loudly instead of half-working.
"""

from magnum.common import exception
from magnum.drivers.common import driver as base

# The operating systems for which Cluster API images exist and that the bridge's ClusterClasses boot.
SUPPORTED_OS = ("ubuntu", "flatcar", "debian", "rockylinux")

_CONDUCTOR_ONLY = (
    "%s is carried out by magnum-capi-bridge, not by the Python "
    "magnum-conductor; is magnum-conductor running next to the bridge?")


def _conductor_only(operation):
    # NotSupported formats its message with the keyword arguments, so pass the text as the
    # "operation" it expects rather than as a raw message that could contain a stray '%'.
    return exception.NotSupported(operation=_CONDUCTOR_ONLY % operation)


def _invalid_master_size(node_count):
    # MasterNGSizeInvalid exists from magnum 20.0.0 on; older releases have only the generic error.
    invalid = getattr(exception, "MasterNGSizeInvalid", None)
    if invalid is not None:
        return invalid(requested_size=node_count)
    return exception.InvalidParameterValue(
        err="master node count must be an odd number of at least 1, got %s" % node_count)


class Driver(base.Driver):
    """Registers (vm, <os>, kubernetes) for the bridge and validates what magnum-api asks about."""

    # Read by magnum 18.0.0+: a beta driver must be listed in [drivers] enabled_beta_drivers.
    beta = False

    @property
    def provides(self):
        return [{"server_type": "vm", "os": os_name, "coe": "kubernetes"}
                for os_name in SUPPORTED_OS]

    # -- questions magnum-api asks (20.0.0+) --------------------------------------------------

    def validate_master_size(self, node_count):
        """Control planes are stacked etcd members: an odd count keeps quorum."""
        if not isinstance(node_count, int) or isinstance(node_count, bool):
            raise _invalid_master_size(node_count)
        if node_count < 1 or node_count % 2 == 0:
            raise _invalid_master_size(node_count)

    def validate_master_resize(self, node_count):
        """KubeadmControlPlane scales in place, so a resize obeys the same rule as a create."""
        self.validate_master_size(node_count)

    # -- conductor work: done by magnum-capi-bridge -------------------------------------------

    def create_cluster(self, context, cluster, cluster_create_timeout):
        raise _conductor_only("create_cluster")

    def update_cluster(self, context, cluster, scale_manager=None,
                       rollback=False):
        raise _conductor_only("update_cluster")

    def upgrade_cluster(self, context, cluster, cluster_template,
                        max_batch_size, nodegroup, scale_manager=None,
                        rollback=False):
        raise _conductor_only("upgrade_cluster")

    def delete_cluster(self, context, cluster):
        raise _conductor_only("delete_cluster")

    def resize_cluster(self, context, cluster, resize_manager,
                       node_count, nodes_to_remove, nodegroup=None):
        raise _conductor_only("resize_cluster")

    def create_nodegroup(self, context, cluster, nodegroup):
        raise _conductor_only("create_nodegroup")

    def update_nodegroup(self, context, cluster, nodegroup):
        raise _conductor_only("update_nodegroup")

    def delete_nodegroup(self, context, cluster, nodegroup):
        raise _conductor_only("delete_nodegroup")

    def rotate_ca_certificate(self, context, cluster):
        raise _conductor_only("rotate_ca_certificate")

    def rotate_credential(self, context, cluster):
        raise _conductor_only("rotate_credential")

    # Federation was never implemented by any Kubernetes driver.

    def create_federation(self, context, federation):
        raise exception.NotSupported(operation="create_federation")

    def update_federation(self, context, federation):
        raise exception.NotSupported(operation="update_federation")

    def delete_federation(self, context, federation):
        raise exception.NotSupported(operation="delete_federation")
