"""Helpers for tests of popxl programs."""
from ._dtypes import get_all_dtypes, get_all_int_dtypes

__all__ = ["get_all_dtypes", "get_all_int_dtypes"]
