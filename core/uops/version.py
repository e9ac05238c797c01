"""The core's version: written once, read by packaging (pyproject.toml) and by plugin API checks."""

__version__ = "0.1.0"
