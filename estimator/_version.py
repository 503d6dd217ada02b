"""The package version (read by setuptools for the installed metadata, and by estimate rows)."""

__version__ = "0.1.0"
