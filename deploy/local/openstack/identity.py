#!/usr/bin/python3
"""Make Keystone hold exactly the identities and catalog of the local stack. Idempotent.

One Python process and one admin token instead of ~20 `openstack` CLI calls (each 3-7 s). Every
object is looked up first and only created or corrected when missing or different, so a second run
changes nothing, and duplicates left by earlier tools (e.g. two endpoints for one interface) are
removed. Passwords are checked by logging in with them and only reset when the login fails, so
tokens held by running services stay valid.

With --newest it only adds what newest-up.sh needs: region MAGNUM_NEW_REGION with endpoints of the
existing container-infra service at MAGNUM_NEW_URL. With --barbican, what barbican.sh needs: the
service user barbican and the key-manager service with its endpoints at BARBICAN_URL.

Input: environment variables set by stack.env. Exit status: 0 = done, 3 = the admin password is not
accepted (up.sh then re-runs keystone-manage bootstrap, which resets it), 1 = anything else.
Never prints a password.
"""

import os
import sys

from keystoneauth1 import exceptions as ka_exc
from keystoneauth1 import session as ka_session
from keystoneauth1.identity import v3
from keystoneclient import exceptions as ks_exc
from keystoneclient.v3 import client as ks_client

ENV = os.environ
KEYSTONE_URL = ENV["KEYSTONE_URL"]
REGION = ENV["MCB_REGION"]
STALE_PASSWORD_HASHES = set(os.environ.get("MCB_STALE_PASSWORD_HASHES", "").split())
HOST = ENV["MCB_HOST"]

# (type, name, description, URL) of every catalog entry besides identity (made by bootstrap, but
# checked here too).
CATALOG = [
    ("identity", "keystone", "Keystone Identity Service", KEYSTONE_URL + "/"),
    ("container-infra", "magnum", "Magnum Container Infrastructure Management",
     ENV["MAGNUM_URL"]),
    ("image", "glance", "fake-openstack: Glance image GETs", "http://%s:%s" % (
        HOST, ENV["FAKE_IMAGE_PORT"])),
    ("compute", "nova", "fake-openstack: Nova flavor and keypair GETs", "http://%s:%s/v2.1" % (
        HOST, ENV["FAKE_COMPUTE_PORT"])),
    ("network", "neutron", "fake-openstack: Neutron network GETs", "http://%s:%s" % (
        HOST, ENV["FAKE_NETWORK_PORT"])),
    ("load-balancer", "octavia", "fake-openstack: Octavia (CAPO's API load balancers)", "http://%s:%s" % (
        HOST, ENV["FAKE_LB_PORT"])),
    ("block-storage", "cinder", "fake-openstack: Cinder (root volumes, volume types)", "http://%s:%s/v3/$(project_id)s" % (
        HOST, ENV["FAKE_VOLUME_PORT"])),
]
INTERFACES = ("public", "internal", "admin")


class Keystone:
    """Reads every relevant collection once (a request costs 0.1-0.4 s on a busy box), then creates
    or corrects only what differs, keeping the local view up to date."""

    def __init__(self, ks):
        self.ks = ks
        self.changes = []
        self.domains = ks.domains.list()
        self.roles = ks.roles.list()
        self.projects = ks.projects.list()
        self.users = ks.users.list()
        self.services = ks.services.list()
        self.endpoints = ks.endpoints.list()
        self.regions = ks.regions.list()
        self.grants = set()
        for a in ks.role_assignments.list():
            user = getattr(a, "user", None)
            scope = getattr(a, "scope", {})
            for kind in ("project", "domain"):
                if user and kind in scope:
                    self.grants.add((a.role["id"], user["id"], kind, scope[kind]["id"]))

    def change(self, what):
        self.changes.append(what)
        print("  " + what)

    def domain(self, name, description):
        domain = only([d for d in self.domains if d.name == name], "domain " + name)
        if domain is None:
            domain = self.ks.domains.create(name=name, description=description)
            self.domains.append(domain)
            self.change("created domain %s" % name)
        elif not domain.enabled:
            domain = self.ks.domains.update(domain, enabled=True)
            self.change("enabled domain %s" % name)
        return domain

    def role(self, name):
        role = only([r for r in self.roles if r.name == name], "role " + name)
        if role is None:
            role = self.ks.roles.create(name=name)
            self.roles.append(role)
            self.change("created role %s" % name)
        return role

    def project(self, name, domain, description):
        project = only([p for p in self.projects if p.name == name and p.domain_id == domain.id],
                       "project " + name)
        if project is None:
            project = self.ks.projects.create(name=name, domain=domain, description=description)
            self.projects.append(project)
            self.change("created project %s" % name)
        return project

    def user(self, name, domain, password, project=None):
        user = only([u for u in self.users if u.name == name and u.domain_id == domain.id],
                    "user " + name)
        if user is None:
            user = self.ks.users.create(name=name, domain=domain, password=password,
                                        default_project=project, enabled=True)
            self.users.append(user)
            self.change("created user %s" % name)
            return user
        if not user.enabled:
            user = self.ks.users.update(user, enabled=True)
            self.change("enabled user %s" % name)
        if password is not None and user.id in STALE_PASSWORD_HASHES:
            self.ks.users.update(user, password=password)
            self.change("hashed the password of user %s again (keystone.conf's cost)" % name)
        elif password is not None and not password_works(name, domain, password):
            self.ks.users.update(user, password=password)
            self.change("reset the password of user %s" % name)
        return user

    def grant(self, role, user, project=None, domain=None):
        kind, target = ("project", project) if project is not None else ("domain", domain)
        if (role.id, user.id, kind, target.id) not in self.grants:
            self.ks.roles.grant(role, user=user, project=project, domain=domain)
            self.grants.add((role.id, user.id, kind, target.id))
            self.change("granted role %s to %s on %s %s" % (role.name, user.name, kind, target.name))

    def region(self, region_id):
        if not [r for r in self.regions if r.id == region_id]:
            self.regions.append(self.ks.regions.create(id=region_id))
            self.change("created region %s" % region_id)

    def service(self, stype, name, description):
        service = only([s for s in self.services if s.type == stype and s.name == name],
                       "service %s (%s)" % (name, stype))
        if service is None:
            service = self.ks.services.create(name=name, type=stype, description=description)
            self.services.append(service)
            self.change("created service %s (%s)" % (name, stype))
        return service

    def endpoints_of(self, service, url, region=REGION):
        for interface in INTERFACES:
            found = [e for e in self.endpoints if e.service_id == service.id and
                     e.interface == interface and e.region_id == region]
            keep, extra = (found[0], found[1:]) if found else (None, [])
            for endpoint in extra:
                self.ks.endpoints.delete(endpoint)
                self.change("deleted duplicate %s endpoint of %s" % (interface, service.name))
            if keep is None:
                self.ks.endpoints.create(service=service, url=url, interface=interface,
                                         region=region)
                self.change("created %s endpoint of %s: %s" % (interface, service.name, url))
            elif keep.url != url or not keep.enabled:
                self.ks.endpoints.update(keep, url=url, enabled=True)
                self.change("updated %s endpoint of %s: %s" % (interface, service.name, url))


def only(items, what):
    if len(items) > 1:
        raise SystemExit("identity: %d objects match %s; fix Keystone by hand" % (len(items), what))
    return items[0] if items else None


def password_works(name, domain, password):
    auth = v3.Password(auth_url=KEYSTONE_URL, username=name, password=password,
                       user_domain_id=domain.id)
    try:
        ka_session.Session(auth=auth).get_token()
        return True
    except ka_exc.Unauthorized:
        return False


def newest(state):
    """Only what magnum-api 23 (newest-up.sh) adds: its own region, holding the endpoints of the
    existing container-infra service. Identity, image, compute and network stay in REGION."""
    region = ENV["MAGNUM_NEW_REGION"]
    state.region(region)
    _, name, description, _ = CATALOG[1]
    state.endpoints_of(state.service("container-infra", name, description), ENV["MAGNUM_NEW_URL"],
                       region=region)


def barbican(state):
    """Only what barbican.sh adds: Barbican's service user (keystonemiddleware validates tokens with
    it) and the key-manager catalog entry. Magnum's service user needs no role of Barbican's own:
    its admin role on the service project passes Barbican's default policy for creating, reading
    and deleting secrets and containers (the deprecated admin_or_creator rules, and role:member,
    which admin implies, under the new defaults)."""
    default = state.domain("Default", "The default domain")
    service_project = state.project("service", default, "Service users of the local stack")
    user = state.user("barbican", default, ENV["BARBICAN_SERVICE_PASSWORD"], project=service_project)
    state.grant(state.role("admin"), user, project=service_project)
    state.grant(state.role("service"), user, project=service_project)
    state.region(REGION)
    state.endpoints_of(state.service("key-manager", "barbican", "Barbican Key Manager"),
                       ENV["BARBICAN_URL"])


def main():
    admin_auth = v3.Password(auth_url=KEYSTONE_URL, username="admin",
                             password=ENV["ADMIN_PASSWORD"], project_name="admin",
                             user_domain_id="default", project_domain_id="default")
    sess = ka_session.Session(auth=admin_auth)
    try:
        sess.get_token()
    except ka_exc.Unauthorized:
        print("identity: Keystone refuses the admin password", file=sys.stderr)
        return 3
    state = Keystone(ks_client.Client(session=sess, interface="public", region_name=REGION))
    for flag, add in (("--newest", newest), ("--barbican", barbican)):
        if sys.argv[1:] == [flag]:
            add(state)
            print("identity %s: %s" % (flag, "%d change(s)" % len(state.changes) if state.changes
                                       else "everything already in place"))
            return 0

    default = state.domain("Default", "The default domain")
    admin_role = state.role("admin")
    member_role = state.role("member")
    state.role("reader")
    # devstack gives service users the "service" role too; keystonemiddleware checks it on service tokens.
    service_role = state.role("service")

    admin_project = state.project("admin", default, "Bootstrap project for the admin user")
    # The admin password was just proven by the login above.
    admin = state.user("admin", default, None)
    state.grant(admin_role, admin, project=admin_project)

    service_project = state.project("service", default, "Service users of the local stack")
    # peer_demo: the tenant of `make bench-peer`, whose clusters then never show in demo's lists
    # while the end-to-end tests run beside it; upgrade_demo the upgrade test's, whose OpenStack
    # cluster then never shows among the servers of the OpenStack tests' projects.
    for name, password_var in (("demo", "DEMO_PASSWORD"), ("alt_demo", "ALT_DEMO_PASSWORD"),
                               ("peer_demo", "PEER_DEMO_PASSWORD"),
                               ("upgrade_demo", "UPGRADE_DEMO_PASSWORD")):
        project = state.project(name, default, "Tenant %s of the local stack" % name)
        user = state.user(name, default, ENV[password_var], project=project)
        state.grant(member_role, user, project=project)

    magnum = state.user("magnum", default, ENV["MAGNUM_SERVICE_PASSWORD"], project=service_project)
    state.grant(admin_role, magnum, project=service_project)
    state.grant(service_role, magnum, project=service_project)

    trustee_domain = state.domain(ENV["MAGNUM_TRUSTEE_DOMAIN"],
                                  "Owns users and projects created by magnum")
    domain_admin = state.user(ENV["MAGNUM_DOMAIN_ADMIN"], trustee_domain,
                              ENV["MAGNUM_DOMAIN_ADMIN_PASSWORD"])
    state.grant(admin_role, domain_admin, domain=trustee_domain)

    state.region(REGION)
    for stype, name, description, url in CATALOG:
        state.endpoints_of(state.service(stype, name, description), url)

    print("identity: %s" % ("%d change(s)" % len(state.changes) if state.changes
                             else "everything already in place"))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ka_exc.ConnectFailure as err:
        print("identity: cannot reach Keystone at %s: %s" % (KEYSTONE_URL, err), file=sys.stderr)
        sys.exit(1)
