"""The skip-files policy: which code objects are never translated.

The standard library, `sot` itself, the libraries of the toolchain (numpy, bytecode, pytest...) and
Paddle's framework internals run untouched. User code, wherever it lives, is translated; model code that
ships inside Paddle (``paddle/vision/models`` and the like) counts as user code.
"""
from __future__ import annotations

import collections
import collections.abc
import dataclasses
import functools
import os
import sys
import sysconfig
import types
from functools import lru_cache
from typing import Any

import paddle
from paddle.utils import decorator_utils, layers_utils

import sot

_STDLIB_DIRS = tuple(
    os.path.realpath(p) + os.sep
    for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
)
_PADDLE_DIR = os.path.dirname(os.path.realpath(paddle.__file__)) + os.sep
_SOT_DIR = os.path.dirname(os.path.realpath(sot.__file__)) + os.sep
# Model code inside Paddle: translated like user code.
_PADDLE_MODEL_DIRS = tuple(_PADDLE_DIR + sub + os.sep for sub in ("vision/models", "text/models"))

_SKIPPED_LIBRARIES = ("numpy", "bytecode", "_pytest", "pytest", "pluggy", "google", "decorator", "hypothesis",
                      "coverage", "setuptools", "pkg_resources", "typing_extensions", "opt_einsum",
                      "networkx", "PIL", "astor", "scipy", "IPython", "ipykernel", "tqdm")
_SKIPPED_LIBRARY_DIRS: tuple[str, ...] = ()


def _library_dirs() -> tuple[str, ...]:
    dirs = []
    for path in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        for name in _SKIPPED_LIBRARIES:
            dirs.append(os.path.join(os.path.realpath(path), name) + os.sep)
    return tuple(dirs)


_SKIPPED_LIBRARY_DIRS = _library_dirs()

_skipped_codes: set[types.CodeType] = set()
_NAMEDTUPLE_NAMESPACE = "namedtuple_"


def skip_code(code: types.CodeType) -> None:
    """Never translate ``code`` (``sot.skip_function``)."""
    _skipped_codes.add(code)


# Library codes whose whole call tree runs natively, the hook suspended: nothing they call is translated.
# For machinery whose later work depends on the exact eager ops of the code it calls, e.g. Paddle's
# non-reentrant ``recompute``, whose backward re-runs the user's function under saved-tensor hooks that
# match the tensors it saves one by one against those of the forward run (a translated run saves others).
_hook_free_codes: set[types.CodeType] = set()


def run_hook_free(functions: list[Any]) -> frozenset[types.CodeType]:
    """Run every frame of ``functions`` and of the functions nested in them (closures made at run time)
    natively, the thread's callback suspended, until the process ends. Returns those codes."""
    codes = _with_nested_codes([fn.__code__ for fn in functions])
    _hook_free_codes.update(codes)
    return codes


def runs_hook_free(code: types.CodeType) -> bool:
    return code in _hook_free_codes


def _imports_paddle(path: str) -> bool:
    """A library file that imports Paddle is model code (e.g. a model zoo installed with pip)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as source:
            text = source.read()
    except OSError:
        return False
    return "import paddle" in text or "from paddle" in text


@lru_cache(maxsize=4096)
def skip_filename(filename: str) -> bool:
    """Whether code from ``filename`` belongs to a library we never translate."""
    if filename.startswith("<"):
        return filename.startswith(("<frozen", "<sot"))
    path = os.path.realpath(filename)
    if path.startswith(_SOT_DIR):
        return True
    if path.startswith(_PADDLE_DIR):
        return not path.startswith(_PADDLE_MODEL_DIRS)
    if path.startswith(_SKIPPED_LIBRARY_DIRS):
        return True
    if f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path:
        return not _imports_paddle(path)
    return path.startswith(_STDLIB_DIRS)


def should_skip(code: types.CodeType, globals_: dict) -> bool:
    """The policy for one frame. Code compiled from a string (``<string>``: dataclass and namedtuple
    methods, exec'd snippets) is judged by the file of the module whose globals it runs in."""
    if code in _skipped_codes:
        return True
    filename = code.co_filename
    if filename.startswith("<") and not filename.startswith(("<frozen", "<sot")):
        module = globals_.get("__name__")
        if isinstance(module, str) and module.startswith(_NAMEDTUPLE_NAMESPACE):
            # The ``__new__`` of a named tuple class (``collections.namedtuple`` evaluates it in a private
            # namespace of that name): it only builds the tuple. Called natively (by a Paddle function
            # returning ``TopKRetType``, also while a program is built), translating it finds nothing to
            # compile and breaks at ``tuple.__new__``; in simulation named tuples are built directly.
            return True
        module_file = globals_.get("__file__")
        if isinstance(module_file, str):
            return skip_filename(module_file)
        module = globals_.get("__name__")
        return isinstance(module, str) and module.split(".")[0] in sys.builtin_module_names
    return skip_filename(filename)


# Library code that is still worth inlining into the caller's graph rather than running natively: Paddle's
# layer helpers are plain Python over tensors and Python values (masks, shape bookkeeping).
_INLINABLE_LIBRARY_DIRS = (_PADDLE_DIR + "nn" + os.sep + "layer" + os.sep,
                           # ``paddle.distribution``: tensor arithmetic in Python classes (a policy network's
                           # ``Normal(mu, std).log_prob(a)``); run natively, each method call broke the graph.
                           _PADDLE_DIR + "distribution" + os.sep)
# Paddle's forward pre-hooks that re-parametrize a layer's weight at every call (``weight_norm``,
# ``spectral_norm``): tensor arithmetic on the layer's parameters and a ``setattr`` of the result. Run natively
# they would break the graph before every such layer.
_INLINABLE_LIBRARY_FILES = tuple(_PADDLE_DIR + os.path.join("nn", "utils", name)
                                 for name in ("weight_norm_hook.py", "spectral_norm_hook.py"))


# Standard library functions that only move attributes between the user's own objects: inlined, so a
# decorator written with ``functools.wraps`` in the frame does not break the graph.
# ``dataclasses.fields``/``replace``/``is_dataclass`` only read the class's field table (a
# ``ModelOutput.__post_init__`` walks it) and build an instance of the user's class; ``asdict``/``astuple``
# walk the fields into dicts, lists and tuples and copy the leaves (``copy.deepcopy`` of an atomic constant
# is folded: `library_rules`; of a tensor it still runs natively). The code objects nested in
# these (a generator expression) are inlined with them.
def _with_nested_codes(codes: list[types.CodeType]) -> frozenset[types.CodeType]:
    found: set[types.CodeType] = set()
    while codes:
        code = codes.pop()
        found.add(code)
        codes += [const for const in code.co_consts if isinstance(const, types.CodeType)]
    return frozenset(found)


_INLINABLE_DATACLASS_FUNCTIONS = ("fields", "replace", "is_dataclass", "_is_dataclass_instance",
                                  "_replace",  # (3.13: the body of ``replace``)
                                  "asdict", "astuple", "_asdict_inner", "_astuple_inner")
# The mapping classes of the standard library are Python over the user's own methods (``UserDict`` over its
# ``data`` dict, the ``Mapping`` mixins over ``__getitem__``/``__iter__``): an HF-style ``BatchEncoding`` read
# or unpacked (``model(**batch)``) in the frame is simulated through them.
_INLINABLE_LIBRARY_CLASSES = (collections.UserDict, collections.abc.Mapping, collections.abc.MutableMapping,
                              collections.abc.MappingView, collections.abc.KeysView, collections.abc.ItemsView,
                              collections.abc.ValuesView)
# ``paddle.tensor`` is an object forwarding its attributes to the module ``paddle.tensor`` (library code such as
# ``paddle.tensor.math._multiply_with_axis`` reaches functions through it): simulated, the lookup is the module's.
# Paddle's keyword-alias decorators (``Conv2D.forward`` takes ``input=`` for ``x=``) only rename keyword
# arguments before calling the function they wrap, so a built-in layer's forward simulated (`simulate_forward`)
# goes through them to its code.
# Paddle's nested-structure helpers (``paddle.utils.flatten``, ``map_structure``, ``pack_sequence_as``) are
# plain Python over lists, tuples and dicts: ``nn.RNN``'s forward, simulated around a user's cell, uses them.
_STRUCTURE_FUNCTIONS = ("is_sequence", "_sorted", "_yield_value", "_yield_flat_nest", "to_sequence", "flatten",
                        "_sequence_like", "_packed_nest_with_indices", "pack_sequence_as", "map_structure",
                        "_recursive_assert_same_structure", "assert_same_structure")
_INLINABLE_LIBRARY_CODES = _with_nested_codes([fn.__code__ for fn in (
    *[getattr(layers_utils, name) for name in _STRUCTURE_FUNCTIONS if hasattr(layers_utils, name)],
    functools.wraps, functools.update_wrapper, type(paddle.tensor).__getattr__,
    decorator_utils.param_one_alias(["x", "input"])(lambda x: x),
    decorator_utils.param_two_alias(["x", "input"], ["y", "other"])(lambda x, y: x),
    *[getattr(dataclasses, name) for name in _INLINABLE_DATACLASS_FUNCTIONS if hasattr(dataclasses, name)],
    *[member for cls in _INLINABLE_LIBRARY_CLASSES for member in vars(cls).values()
      if isinstance(member, types.FunctionType)])])


def may_inline(code: types.CodeType, globals_: dict) -> bool:
    """Whether a call of ``code`` found during simulation is simulated (inlined) rather than run natively."""
    if not should_skip(code, globals_) or code in _INLINABLE_LIBRARY_CODES:
        return True
    path = os.path.realpath(code.co_filename)
    return (path.startswith(_INLINABLE_LIBRARY_DIRS) or path in _INLINABLE_LIBRARY_FILES) and \
        code not in _skipped_codes
