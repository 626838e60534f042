"""What the native core was built with and what it runs on."""

from __future__ import annotations

from ._native import build_info

__all__ = ["build_info"]
