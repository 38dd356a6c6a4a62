"""Build script of sot.

Project metadata and the pure-Python packages are declared in pyproject.toml;
this file only adds the C extension ``sot.eval_frame_ext._eval_frame`` (the
PEP 523 frame evaluation hook).

The extension is made of a version-neutral part (eval_frame.c) and one small
file per family of CPython frame layouts, picked here from the running
interpreter's version. To support a new Python version, add its file to
FRAME_SOURCES (and its section to frame_compat.h).

Three optional extensions (C++) need Paddle's C++ headers, shipped in the
paddlepaddle wheel: ``sot.eval_frame_ext._autograd_errors`` lets a gradient hook
fail with Paddle's own error type (see autograd_errors.cpp),
``sot.eval_frame_ext._tensor_meta`` reads a tensor's dtype and shape from its C++
tensor for the guards (see tensor_meta.cpp), and
``sot.eval_frame_ext._gradient_flags`` gives the gradients of compiled programs
eager's autograd flags with C++ gradient hooks (see gradient_flags.cpp). They are
built when Paddle is installed in the building interpreter, and skipped (with a
warning) otherwise or when they fail to compile; sot then raises the same message
as Paddle's wrapped OSError, its guards read the Python attributes, and the flags
are given by Python hooks and eager views.

Environment:
    SOT_EXT_DEBUG=1   build the extension without optimisation, with C asserts.
"""

import importlib.util
import os
import re
import shutil
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:  # setuptools >= 61 re-exports the distutils error classes here
    from setuptools.errors import CCompilerError, CompileError, ExecError, LinkError, PlatformError

    _BUILD_ERRORS = (CCompilerError, CompileError, ExecError, LinkError, PlatformError)
except ImportError:  # pragma: no cover - very old setuptools
    from distutils.errors import (
        CCompilerError,
        CompileError,
        DistutilsExecError,
        DistutilsPlatformError,
        LinkError,
    )

    _BUILD_ERRORS = (CCompilerError, CompileError, DistutilsExecError, LinkError, DistutilsPlatformError)


EXT_DIR = os.path.join("sot", "eval_frame_ext")

# (major, minor) -> the per-version frame file compiled with eval_frame.c.
FRAME_SOURCES = {
    (3, 10): "frame_310.c",
    (3, 11): "frame_311.c",
    (3, 12): "frame_312.c",
    (3, 13): "frame_312.c",
}

# Headers the extension includes besides Python.h (3.10 uses the public frame
# object; 3.11+ the interpreter's internal frame header).
FRAME_HEADER = {
    (3, 10): "frameobject.h",
}
DEFAULT_FRAME_HEADER = os.path.join("internal", "pycore_frame.h")

INSTALL_HINT = (
    "Install a C compiler and the Python development headers for this interpreter, e.g.\n"
    "  Debian/Ubuntu:  apt-get install gcc python3-dev   (or python{v}-dev for Python {v})\n"
    "  Fedora/RHEL:    dnf install gcc python3-devel\n"
    "  Alpine:         apk add gcc musl-dev python3-dev\n"
    "(a pyenv/conda Python ships its headers; only gcc is then needed)"
).format(v="%d.%d" % sys.version_info[:2])


def _versions(keys):
    return ", ".join("%d.%d" % k for k in sorted(keys))


def frame_source():
    """The per-version source file, or stop with a clear message."""
    version = sys.version_info[:2]
    if version not in FRAME_SOURCES:
        sys.exit(
            "error: sot's eval-frame extension (sot.eval_frame_ext._eval_frame) does not support "
            "Python %d.%d (%s) yet. Supported Python versions: %s."
            % (version[0], version[1], sys.executable, _versions(FRAME_SOURCES))
        )
    return FRAME_SOURCES[version]


class BuildExt(build_ext):
    """build_ext that explains what to install when compiling is impossible, and skips the optional
    extension when it cannot be built."""

    def _fail(self, reason):
        sys.exit(
            "error: cannot build sot's C extension sot.eval_frame_ext._eval_frame for Python %d.%d: %s\n%s"
            % (sys.version_info[0], sys.version_info[1], reason, INSTALL_HINT)
        )

    def _check_prerequisites(self):
        include = sysconfig.get_paths()["include"]
        frame_header = FRAME_HEADER.get(sys.version_info[:2], DEFAULT_FRAME_HEADER)
        for header in ("Python.h", frame_header):
            if not os.path.isfile(os.path.join(include, header)):
                self._fail("the Python header %s is missing (looked in %s)." % (header, include))
        compiler_cmd = getattr(self.compiler, "compiler_so", None)
        if compiler_cmd:
            exe = compiler_cmd[0]
            if shutil.which(exe) is None:
                self._fail("the C compiler %r was not found." % exe)

    def build_extensions(self):
        self._check_prerequisites()
        try:
            super().build_extensions()
        except _BUILD_ERRORS as exc:
            self._fail("compiling failed (%s). If the compiler or the headers are missing:" % exc)

    def build_extension(self, ext):
        if ext.name not in OPTIONAL_EXTENSIONS:
            super().build_extension(ext)
            return
        try:
            super().build_extension(ext)
        except _BUILD_ERRORS as exc:
            print("warning: skipping the optional extension %s (%s): %s"
                  % (ext.name, exc, OPTIONAL_EXTENSIONS[ext.name]), file=sys.stderr)


def extensions():
    sources = [os.path.join(EXT_DIR, "eval_frame.c"), os.path.join(EXT_DIR, "guard_program.c"),
               os.path.join(EXT_DIR, frame_source())]
    sources.append(os.path.join(EXT_DIR, "tensor_guard.c"))
    depends = [os.path.join(EXT_DIR, "frame_compat.h"), os.path.join(EXT_DIR, "guard_program.h"),
               os.path.join(EXT_DIR, "tensor_meta_api.h")]
    extra_compile_args = []
    undef_macros = []
    if sys.platform != "win32":
        extra_compile_args.append("-std=gnu11")
        if os.environ.get("SOT_EXT_DEBUG"):
            extra_compile_args += ["-O0", "-g3"]
            undef_macros.append("NDEBUG")
    return [
        Extension(
            "sot.eval_frame_ext._eval_frame",
            sources=sources,
            depends=depends,
            extra_compile_args=extra_compile_args,
            undef_macros=undef_macros,
        )
    ] + paddle_extensions()


AUTOGRAD_ERRORS = "sot.eval_frame_ext._autograd_errors"
TENSOR_META = "sot.eval_frame_ext._tensor_meta"
GRADIENT_FLAGS = "sot.eval_frame_ext._gradient_flags"
# The optional extensions (built against Paddle's C++ headers) and what is lost without each.
OPTIONAL_EXTENSIONS = {
    AUTOGRAD_ERRORS: "a refused backward raises Paddle's OSError instead of eager's RuntimeError",
    TENSOR_META: "tensor guards read dtype and shape through the Python getters (slower cache hits)",
    GRADIENT_FLAGS: "gradient flags are given by a Python hook per parameter and views of non-leaf inputs "
                    "(slower train steps)",
}
# name -> (source file, libraries it links, as paths in the paddle package: libs/ or base/ for libpaddle)
PADDLE_EXTENSION_SOURCES = {
    AUTOGRAD_ERRORS: ("autograd_errors.cpp", ["libs/libcommon.so"]),
    TENSOR_META: ("tensor_meta.cpp", ["libs/libcommon.so"]),
    GRADIENT_FLAGS: ("gradient_flags.cpp", ["base/libpaddle.so", "libs/libphi_core.so"]),
}


def paddle_cpp_build():
    """The paddle package's directory (its C++ headers in include/, its libraries in libs/ and base/) and the
    commit it was built from, found without importing Paddle (None when missing)."""
    spec = importlib.util.find_spec("paddle")
    if spec is None or not spec.submodule_search_locations:
        return None
    paddle_dir = list(spec.submodule_search_locations)[0]
    include, libs = os.path.join(paddle_dir, "include"), os.path.join(paddle_dir, "libs")
    if not (os.path.isfile(os.path.join(include, "paddle", "common", "enforce.h"))
            and os.path.isfile(os.path.join(libs, "libcommon.so"))):
        return None
    try:
        with open(os.path.join(paddle_dir, "version", "__init__.py")) as version_file:
            commit = re.search(r"^commit\s*=\s*'([0-9a-f]+)'", version_file.read(), re.MULTILINE)
    except OSError:
        return None
    return (paddle_dir, commit.group(1)) if commit else None


def paddle_extensions():
    """The optional C++ extensions, when Paddle's headers and its libcommon are installed (Linux only:
    autograd_errors relies on libgcc's unwinder, and both on the libs' sonames)."""
    found = paddle_cpp_build() if sys.platform.startswith("linux") else None
    if found is None:
        print("warning: Paddle's C++ headers not found: the optional extensions %s are not built"
              % ", ".join(OPTIONAL_EXTENSIONS), file=sys.stderr)
        return []
    paddle_dir, commit = found
    include = os.path.join(paddle_dir, "include")
    debug = ["-O0", "-g3"] if os.environ.get("SOT_EXT_DEBUG") else []
    return [
        Extension(
            name,
            sources=[os.path.join(EXT_DIR, source)],
            depends=[os.path.join(EXT_DIR, "tensor_meta_api.h")],
            include_dirs=[include, os.path.join(include, "third_party")],
            language="c++",
            # (the C++ classes it shares with Paddle are laid out by this Paddle's headers: used with it only)
            define_macros=[("SOT_PADDLE_COMMIT", '"%s"' % commit)],
            extra_compile_args=["-std=c++17"] + debug,
            extra_link_args=_paddle_link_args(paddle_dir, linked),
        )
        for name, (source, linked) in PADDLE_EXTENSION_SOURCES.items()
    ]


def _paddle_link_args(paddle_dir, linked):
    """Linker arguments for libraries of the paddle package (paths in it). They are loaded by Paddle before
    sot imports these modules (matched by their sonames); the run paths find them for a standalone import:
    installed next to paddle, or where built."""
    args = []
    for folder in sorted({os.path.dirname(lib) for lib in linked}):
        args += ["-L" + os.path.join(paddle_dir, folder), "-Wl,-rpath,$ORIGIN/../../paddle/" + folder,
                 "-Wl,-rpath," + os.path.join(paddle_dir, folder)]
    return args + ["-l:" + os.path.basename(lib) for lib in linked]


setup(
    ext_modules=extensions(),
    cmdclass={"build_ext": BuildExt},
)
