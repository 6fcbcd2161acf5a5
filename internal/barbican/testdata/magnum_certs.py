"""Magnum's own certificate code, as magnum-conductor runs it with cert_manager_type = barbican.

The integration tests run this with the Python of an installed Magnum (Zed on the host, 23.0.0 in
its chroot) to prove that what the bridge writes to Barbican is what Magnum reads, and the other
way round. Usage: magnum_certs.py CONFIG COMMAND ARGS..., JSON on stdout:

  generate ISSUER                      a CA as cluster_create makes it (_generate_ca_cert): {"ref"}
  sign CLUSTER_UUID ISSUER CA_REF      the CSR on stdin signed as sign_certificate does, and the CA
                                       as get_ca_certificate returns it: {"certificate", "ca"}
  delete REF                           delete_cert, as a cluster delete does
  secrets REF                          the container's secret_refs names and each secret's name
                                       and content type (no payloads): {"name", "type", "secrets"}
"""

import json
import sys

import magnum.conf
from magnum.common.cert_manager import get_backend
from magnum.conductor.handlers.common import cert_manager as conductor_certs


class Cluster(object):
    """The cluster fields Magnum's certificate functions read."""

    def __init__(self, uuid, name, ca_cert_ref):
        self.uuid = uuid
        self.name = name
        self.ca_cert_ref = ca_cert_ref
        self.etcd_ca_cert_ref = None
        self.front_proxy_ca_cert_ref = None
        self.magnum_cert_ref = None


def text(value):
    return value.decode() if isinstance(value, bytes) else value


def main():
    config, command, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    magnum.conf.CONF(["--config-file", config], project="magnum", default_config_files=[])
    if command == "generate":
        ref, _, _ = conductor_certs._generate_ca_cert(args[0])
        out = {"ref": ref}
    elif command == "sign":
        cluster = Cluster(*args)
        csr = sys.stdin.read()
        out = {
            "certificate": text(conductor_certs.sign_node_certificate(cluster, csr)),
            "ca": text(conductor_certs.get_cluster_ca_certificate(cluster).get_certificate()),
        }
    elif command == "delete":
        get_backend().CertManager.delete_cert(args[0])
        out = {}
    elif command == "secrets":
        out = describe(args[0])
    else:
        sys.exit("unknown command " + command)
    json.dump(out, sys.stdout)


def describe(ref):
    """Reads the container with the same client the cert manager uses, whichever it is."""
    from magnum.common.cert_manager import barbican_cert_manager as bcm
    connection = bcm.get_admin_clients().barbican()
    uuid = ref.rstrip("/").split("/")[-1]
    if hasattr(connection, "get_container"):  # openstacksdk (2026.2 on)
        container = connection.get_container(uuid)
        refs = container.secret_refs or []
        secret = lambda sref: connection.get_secret(sref.split("/")[-1])
    else:  # python-barbicanclient
        container = connection.containers.get(ref)
        refs = [{"name": k, "secret_ref": v} for k, v in container.secret_refs.items()]
        secret = connection.secrets.get
    secrets = {}
    for sr in refs:
        s = secret(sr["secret_ref"])
        types = s.content_types or {}
        secrets[sr["name"]] = {"name": s.name, "content_type": types.get("default")}
    return {"name": container.name, "type": container.type, "secrets": secrets}


if __name__ == "__main__":
    main()
