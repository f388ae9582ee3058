"""Code generator: ``schemas/*.yaml`` -> ``generated/fleet_generated`` (run ``python -m codegen``)."""

from .generate import CodegenError, check, generate, render_all
from .openapi import SpecError, load_spec

__all__ = ["CodegenError", "SpecError", "check", "generate", "load_spec", "render_all"]
