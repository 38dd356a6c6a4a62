"""Import sot.eval_frame_ext on every Python version the hook supports.

On 3.11 this is a plain ``import sot.eval_frame_ext``. On the other versions
(3.10, 3.12, 3.13) the ``sot`` package itself refuses to import for now (its
executor needs 3.11), so the hook is loaded from its files instead, without
``sot``, its executor or Paddle: the extension built for this interpreter
(``sot/eval_frame_ext/_eval_frame.cpython-3XX-*.so``, made by
``pip install -e . --no-deps`` or scripts/make_venvs.sh) as
``sot.eval_frame_ext._eval_frame``, then the wrapper package
(``sot/eval_frame_ext/__init__.py``) as ``sot.eval_frame_ext``.

Used by test_hook.py and bench_hook.py: ``from hook_loader import efx``.
"""

import importlib.machinery
import importlib.util
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG_DIR = os.path.join(REPO_ROOT, "sot", "eval_frame_ext")


def load_hook_package_from_files():
    """sot.eval_frame_ext, loaded from its files without importing sot."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        so_path = os.path.join(PKG_DIR, "_eval_frame" + suffix)
        if os.path.isfile(so_path):
            break
    else:
        raise ImportError(
            "sot's C extension is not built for Python %d.%d in %s: run scripts/make_venvs.sh "
            "(or `pip install -e . --no-deps` with this interpreter)" % (sys.version_info[:2] + (PKG_DIR,))
        )
    names = []
    try:
        ext_spec = importlib.util.spec_from_file_location("sot.eval_frame_ext._eval_frame", so_path)
        ext = importlib.util.module_from_spec(ext_spec)
        sys.modules[ext_spec.name] = ext
        names.append(ext_spec.name)
        ext_spec.loader.exec_module(ext)

        spec = importlib.util.spec_from_file_location(
            "sot.eval_frame_ext", os.path.join(PKG_DIR, "__init__.py"), submodule_search_locations=[PKG_DIR]
        )
        module = importlib.util.module_from_spec(spec)
        # Already an attribute, so the wrapper's `from . import _eval_frame`
        # imports nothing (importing it would import the package sot first).
        module._eval_frame = ext
        sys.modules[spec.name] = module
        names.append(spec.name)
        spec.loader.exec_module(module)
    except BaseException:
        for name in names:
            sys.modules.pop(name, None)
        raise
    return module


try:
    import sot.eval_frame_ext as efx
except ImportError as exc:
    # sot/__init__ refuses this Python version ("... this is Python 3.X ...").
    if "Python %d.%d" % sys.version_info[:2] not in str(exc):
        raise
    efx = load_hook_package_from_files()
