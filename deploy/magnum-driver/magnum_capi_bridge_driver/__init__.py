"""magnum.drivers entry point for magnum-capi-bridge (API-side validation only)."""

__version__ = "0.1.0"
