"""Tests of the magnum-api side driver against the installed magnum (python3-magnum).

Run: /usr/bin/python3 -m unittest discover -s deploy/magnum-driver/tests -v
"""

import importlib
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent

try:
    import magnum.conf  # noqa: F401  registers [drivers] options used by get_driver
    from magnum.common import exception
    from magnum.drivers.common import driver as base
except ImportError as err:  # pragma: no cover - environment problem, reported clearly
    raise unittest.SkipTest("magnum is not importable (install python3-magnum): %s" % err)


class InstalledCopy(unittest.TestCase):
    """Installs the package with install.py into a temporary directory, as up.sh does for real."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        out = subprocess.run(
            [sys.executable, str(PACKAGE_ROOT / "install.py"), "--target", cls.tmp.name],
            check=True, capture_output=True, text=True).stdout
        assert out.startswith("installed:"), out
        sys.path.insert(0, cls.tmp.name)
        importlib.invalidate_caches()
        import pkg_resources
        pkg_resources.working_set.add_entry(cls.tmp.name)
        cls.module = importlib.import_module("magnum_capi_bridge_driver.driver")

    @classmethod
    def tearDownClass(cls):
        sys.path.remove(cls.tmp.name)
        cls.tmp.cleanup()
        base.Driver.definitions = None

    def setUp(self):
        self.driver = self.module.Driver()

    def test_install_is_idempotent(self):
        out = subprocess.run(
            [sys.executable, str(PACKAGE_ROOT / "install.py"), "--target", self.tmp.name],
            check=True, capture_output=True, text=True).stdout
        self.assertTrue(out.startswith("unchanged:"), out)

    def test_entry_point_is_found_by_magnum(self):
        base.Driver.definitions = None  # magnum caches the scan per process
        for os_name in ("ubuntu", "flatcar", "debian", "rockylinux"):
            found = base.Driver.get_driver("vm", os_name, "kubernetes")
            self.assertIsInstance(found, self.module.Driver, os_name)
        with self.assertRaises(exception.ClusterTypeNotSupported):
            base.Driver.get_driver("bm", "ubuntu", "kubernetes")

    def test_provides_only_vm_kubernetes(self):
        tuples = {(p["server_type"], p["os"], p["coe"]) for p in self.driver.provides}
        self.assertEqual(tuples, {("vm", "ubuntu", "kubernetes"), ("vm", "flatcar", "kubernetes"),
                                  ("vm", "debian", "kubernetes"), ("vm", "rockylinux", "kubernetes")})

    def test_no_abstract_method_left(self):
        self.assertEqual(getattr(self.module.Driver, "__abstractmethods__", frozenset()), frozenset())
        self.assertFalse(self.module.Driver.beta)

    def test_master_size_must_be_odd_and_positive(self):
        for good in (1, 3, 5, 7):
            self.driver.validate_master_size(good)
            self.driver.validate_master_resize(good)
        for bad in (0, 2, 4, -1, "3", None, True, 1.0):
            with self.assertRaises(exception.MagnumException, msg=repr(bad)) as caught:
                self.driver.validate_master_size(bad)
            self.assertEqual(caught.exception.code, 400, repr(bad))
            with self.assertRaises(exception.MagnumException, msg=repr(bad)):
                self.driver.validate_master_resize(bad)

    def test_conductor_operations_refuse_loudly(self):
        calls = {
            "create_cluster": (None, None, 60),
            "update_cluster": (None, None),
            "upgrade_cluster": (None, None, None, 1, None),
            "delete_cluster": (None, None),
            "resize_cluster": (None, None, None, 3, []),
            "create_nodegroup": (None, None, None),
            "update_nodegroup": (None, None, None),
            "delete_nodegroup": (None, None, None),
            "rotate_ca_certificate": (None, None),
            "rotate_credential": (None, None),
        }
        for name, args in calls.items():
            with self.assertRaises(exception.NotSupported, msg=name) as caught:
                getattr(self.driver, name)(*args)
            self.assertIn("magnum-capi-bridge", str(caught.exception), name)
            self.assertIn(name, str(caught.exception))
        for name in ("create_federation", "update_federation", "delete_federation"):
            with self.assertRaises(exception.NotSupported, msg=name):
                getattr(self.driver, name)(None, None)

    def test_optional_hooks_stay_harmless(self):
        # The Python conductor's periodic tasks would call these; they must not blow up.
        self.assertIsNone(self.driver.get_monitor(None, None))
        self.assertIsNone(self.driver.get_scale_manager(None, None, None))
        self.assertIsNone(self.driver.update_cluster_status(None, None))


if __name__ == "__main__":
    unittest.main()
