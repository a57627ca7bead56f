"""Stand-ins that let a vLLM release's own Python files import on a machine without a GPU or
vLLM's heavy dependencies: the one mechanism behind both callers that run a release's code.

- kvops/doctor/gen_cli_schema.py (the recorder of vllm_cli.json) imports the release's argument
  parser and config classes; it stands in whatever the release's own code imports and no other
  finder has (a third-party library not installed here, a `vllm._C` with no file in the tree).
- kvops/doctor/reproducing/release_sandbox.py (`kvops doctor --repro`) runs single functions;
  it stands in a fixed list of edge packages even when they are installed, so every machine runs
  the same thing, and the compiled extension modules the release's wheel carried.

A stand-in module is a package whose every attribute is a stand-in class. A stand-in class
accepts anything and does nothing: any attribute is another stand-in, subscripting and `|` give
itself (type hints), it iterates as empty, it is a base class that takes class keywords (`class
X(msgspec.Struct, omit_defaults=True)`), pydantic accepts any value for it (vLLM's config classes
are pydantic dataclasses), and called on one function it returns that function (a decorator).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import re
import sys
import types
from collections.abc import Iterable
from typing import Any

# Never stood in, even when missing: a stand-in would make vLLM believe a TPU/Neuron/XPU is present.
NEVER = r"tpu|neuron|habana|intel_extension|ipex|oneccl|torch_xla|jax|amdsmi|hpu|xpu|aiter|^vllm_"

STOOD_IN: list[str] = []  # every module stood in so far in this process, in import order

_THIS = os.path.abspath(__file__)


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


class _StandInType(type):
    """The metaclass of every stand-in class (see the module docstring)."""

    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any], **_kw: Any) -> _StandInType:
        return super().__new__(mcls, name, bases, ns)

    def __init__(cls, name: str, bases: tuple[type, ...], ns: dict[str, Any], **_kw: Any) -> None:
        super().__init__(name, bases, ns)  # class keywords (omit_defaults=True) are accepted, unused

    def __getattr__(cls, name: str) -> Any:
        if _dunder(name):
            raise AttributeError(name)
        return stand_in_class(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs and not isinstance(args[0], _StandInType):
            return args[0]  # used as a decorator: keep the decorated function
        return super().__call__(*args, **kwargs)

    def __getitem__(cls, _item: Any) -> Any:
        return cls

    def __or__(cls, _other: Any) -> Any:
        return cls

    def __ror__(cls, _other: Any) -> Any:
        return cls

    def __iter__(cls) -> Any:
        return iter(())


def _any_schema(cls: Any, _source: Any, _handler: Any) -> Any:
    from pydantic_core import core_schema  # vLLM's config classes are pydantic: any value passes

    return core_schema.any_schema()


def _instance_call(self: Any, *args: Any, **kwargs: Any) -> Any:
    if len(args) == 1 and callable(args[0]):
        return args[0]  # an instance used as a decorator keeps the function too
    return stand_in_class(f"{type(self).__qualname__}()")()


def _instance_getattr(self: Any, name: str) -> Any:
    if _dunder(name):
        raise AttributeError(name)
    return stand_in_class(f"{type(self).__qualname__}.{name}")()


def stand_in_class(qualname: str) -> type:
    """A stand-in class named by where it was reached (`msgspec.Struct`, `zmq.Context.socket`)."""
    ns = {
        "__qualname__": qualname,
        "__module__": __name__,
        "__init_subclass__": classmethod(lambda cls, **kw: None),
        "__get_pydantic_core_schema__": classmethod(_any_schema),
        "__init__": lambda self, *a, **k: None,
        "__call__": _instance_call,
        "__getattr__": _instance_getattr,
    }
    return _StandInType(qualname.rsplit(".", 1)[-1], (), ns)


class StandInModule(types.ModuleType):
    """A stand-in package: its submodules are stood in too, its attributes are stand-in classes."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if _dunder(name):
            raise AttributeError(name)
        value = stand_in_class(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Which modules become stand-ins, first on sys.meta_path:

    - `always`: these top-level packages, even when installed (the repro's edge);
    - `extensions`: these dotted modules (the wheel's compiled ones) when no other finder has them;
    - `release_root` given: a `vllm.*` module with no file under it (a compiled `_C`), and any other
      module that the release's own code imports and no other finder has, unless it is in NEVER.
    """

    def __init__(
        self, always: Iterable[str] = (), extensions: Iterable[str] = (), release_root: str | None = None
    ) -> None:
        self.always = set(always)
        self.extensions = set(extensions)
        self.release_root = release_root

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if self._stands_in(fullname, path, target):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def _stands_in(self, fullname: str, path: Any, target: Any) -> bool:
        top = fullname.split(".")[0]
        if top in self.always:
            return True
        if fullname in self.extensions:
            return not self._found_elsewhere(fullname, path, target)
        if self.release_root is None:
            return False
        if top == "vllm":
            own = os.path.join(self.release_root, *fullname.split("."))
            return not (os.path.exists(own + ".py") or os.path.isdir(own))
        if re.search(NEVER, top) or not self._asked_by_release():
            return False
        return not self._found_elsewhere(fullname, path, target)

    def _found_elsewhere(self, fullname: str, path: Any, target: Any) -> bool:
        for finder in sys.meta_path:
            if finder is self:
                continue
            try:
                if finder.find_spec(fullname, path, target) is not None:
                    return True
            except Exception:  # a broken finder of someone else's: as if it had not found it
                continue
        return False

    def _asked_by_release(self) -> bool:
        """Whether the import statement is in the release's code (importlib's frames and ours skipped)."""
        frame: types.FrameType | None = sys._getframe(3)
        while frame is not None and (
            "importlib" in frame.f_code.co_filename or frame.f_code.co_filename == _THIS
        ):
            frame = frame.f_back
        root = self.release_root or ""
        return frame is not None and frame.f_code.co_filename.startswith(root)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        STOOD_IN.append(spec.name)
        return StandInModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install(finder: StandInFinder) -> StandInFinder:
    """Put `finder` first on sys.meta_path (before the finders of installed packages)."""
    sys.meta_path.insert(0, finder)
    return finder


def stand_in_versions(release_root: str) -> None:
    """vLLM asks importlib.metadata for versions of libraries that may be stand-ins here: answer
    the release's own code (only) with a far-future version, so its newest-library code path is taken."""
    import importlib.metadata as md

    real = md.version

    def version(distribution_name: str) -> str:
        try:
            return real(distribution_name)
        except md.PackageNotFoundError:
            if sys._getframe(1).f_code.co_filename.startswith(release_root):
                return "99.0.0"
            raise

    md.version = version


def stood_in() -> list[str]:
    """The stood-in modules so far: third-party ones by their top-level name, vLLM's own in full."""
    return sorted({name.split(".")[0] if name.split(".")[0] != "vllm" else name for name in STOOD_IN})
