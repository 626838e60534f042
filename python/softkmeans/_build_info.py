"""What the native core was built with and what it runs on."""

from __future__ import annotations

from . import _core


def build_info() -> dict:
    """Compiler, OpenMP version, SIMD levels (available and selected), default threads."""
    return {
        "compiler": _core.compiler,
        "openmp": _core.openmp_version,
        "simd_available": list(_core.available_simd_levels()),
        "simd_selected": _core.selected_simd_level(),
        "default_threads": _core.default_threads(),
    }
