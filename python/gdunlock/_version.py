"""The package version; the library (gdu_st_version) must be the same."""
__version__ = "0.1.0"
