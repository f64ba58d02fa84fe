"""secinfer: two-party private neural-network inference.

The protocols live in the Rust core (``secinfer._core``, built by maturin); this package is a
thin face over it plus the PyTorch side (datasets, training recipes, export), which imports torch
only where it is needed.
"""

# The errors the core raises, one class per kind of failure, all under SecinferError (itself a
# RuntimeError): retry on PeerTimeout, report Refused, fix the model on BadModel.
_ERRORS = ["SecinferError", "PeerTimeout", "PeerClosed", "MalformedMessage", "Refused",
           "BadModel", "BadInput", "Unsupported"]

__all__ = ["core", "Server", "Client", "InferenceResult", "Cost", "PhaseCost", "ChocoReport", "export",
           "Residual", "load_model_dir", "FixedPointModel", *_ERRORS]


def core():  # noqa: ANN201 - the module type is built by maturin
    """The compiled Rust core module (raises ImportError with a hint if it is not built)."""
    try:
        from . import _core
    except ImportError as e:  # pragma: no cover - exercised only on a broken install
        raise ImportError(
            "secinfer._core is not built: run `make test` or "
            "`maturin develop -m python/pyproject.toml` in a virtualenv"
        ) from e
    return _core


# --- Python face. Lazy, so `import secinfer` needs neither torch nor the built core.
_LAZY = {"Server": ("api", "Server"), "Client": ("api", "Client"),
         "InferenceResult": ("api", "InferenceResult"), "Cost": ("api", "Cost"),
         "PhaseCost": ("api", "PhaseCost"), "ChocoReport": ("choco", "ChocoReport"),
         "export": ("graph_export", "export"),
         "Residual": ("graph_export", "Residual"),
         "load_model_dir": ("modelio", "load_model_dir"),
         "FixedPointModel": ("fixedpoint", "FixedPointModel")}


def __getattr__(name):
    if name in _ERRORS:
        value = getattr(core(), name)
        globals()[name] = value
        return value
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(f"{__name__}.{mod}"), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
