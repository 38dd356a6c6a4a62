"""`sot.report`: the HTML page over the user's source (line classes, SIR, guards, escaping), and a screenshot of
it taken by headless Chromium (skipped when Chromium is not installed)."""
from __future__ import annotations

import html
import importlib.util
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import paddle
import pytest

import sot
from conftest import line_of

REPORT = sys.modules["sot.report"]  # `sot.report` is the function; the module holds the colours


def _t(*shape: int, dtype: str = "float32") -> paddle.Tensor:
    return paddle.to_tensor(np.arange(np.prod(shape), dtype=dtype).reshape(shape) / 10)


def _row(page: str, line: int) -> str:
    """The table row of source line ``line`` (the page shows only this file)."""
    match = re.search(rf'<tr id="f\d+-L{line}" class="line ([a-z]*)"[^>]*>.*?</tr>', page)
    assert match, f"no row for line {line}"
    return match.group(0)


def _line_class(page: str, line: int) -> str:
    return re.search(r'class="line ([a-z]*)"', _row(page, line)).group(1)


# -- functions reported on (their source is this file) -----------------------------------------------------------
def helper(y):
    return paddle.nn.functional.relu(y) * 2


def compiled_fn(x, w):
    y = paddle.matmul(x, w)
    y = helper(y) + 1  # <b>&"not markup"</b>
    for _ in range(8):
        y = y * 1.5
    return y


def falls_back(x):
    z = x + 1
    sot.psdb.fallback()
    return z * 2


def both(x, w):
    a = compiled_fn(x, w)
    b = falls_back(x)
    return a, b


def small(x):
    return x + 1


def breaks(x):
    y = x * 2
    sot.psdb.breakgraph()
    return y + 1


class Block(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(3, 4)

    def forward(self, x):
        return paddle.nn.functional.relu(self.fc(x))


# -- content ------------------------------------------------------------------------------------------------------
def test_report_returns_path_and_colours_lines(tmp_path):
    path = tmp_path / "report.html"
    x, w = _t(2, 3), _t(3, 4)
    returned = sot.report(both, x, w, path=str(path))
    assert returned == str(path)
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # Lines a SIR statement of a compiled graph came from.
    for marker in ("paddle.matmul(x, w)", "y = y * 1.5"):
        assert _line_class(page, line_of(compiled_fn, marker)) == "graph", marker
    assert _line_class(page, line_of(helper, "relu")) == "graph"
    # The frame that fell back: its lines, and the line that made it fall back, stronger.
    assert _line_class(page, line_of(falls_back, "psdb.fallback()")) == "fail"
    assert _line_class(page, line_of(falls_back, "z = x + 1")) == "fallback"
    assert _line_class(page, line_of(falls_back, "return z * 2")) == "fallback"
    # SIR text and the fallback reason are on the page.
    assert "SIR compiled_fn(" in page and "api paddle.matmul(var_0, var_1)" in page
    assert "psdb.fallback() was called" in page
    assert f"{Path(__file__).name}:{line_of(falls_back, 'psdb.fallback()')}" in page
    assert "x.shape == [2, 3]" in page  # guards


def test_report_colours_in_css_and_legend(tmp_path):
    page = Path(sot.report(small, _t(2), path=tmp_path / "r.html")).read_text(encoding="utf-8")
    for cls, colour in REPORT.COLOURS.items():
        assert colour in page, cls
    assert _line_class(page, line_of(small, "return x + 1")) == "eager"


def test_report_escapes_everything(tmp_path):
    page = Path(sot.report(compiled_fn, _t(2, 3), _t(3, 4), path=tmp_path / "r.html")).read_text(encoding="utf-8")
    assert '<b>&"not markup"</b>' not in page
    assert "&lt;b&gt;&amp;&quot;not markup&quot;&lt;/b&gt;" in page
    # Self-contained: no script, no external resource.
    assert "<script" not in page.lower()
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "<link" not in page.lower()


def test_report_escapes_generated_code_without_source(tmp_path):
    namespace: dict = {"paddle": paddle, "__name__": "generated_module"}
    source = "def gen_<fn>(x):\n    return x * 2\n".replace("<fn>", "fn")
    exec(compile(source, "<generated & 'odd'>", "exec"), namespace)
    page = Path(sot.report(namespace["gen_fn"], _t(2), path=tmp_path / "r.html")).read_text(encoding="utf-8")
    assert "Frames without readable source" in page
    assert "&lt;generated &amp; &#x27;odd&#x27;&gt;" in page
    assert "<generated & 'odd'>" not in page


def test_report_graph_break(tmp_path):
    page = Path(sot.report(breaks, _t(2), path=tmp_path / "r.html")).read_text(encoding="utf-8")
    assert _line_class(page, line_of(breaks, "breakgraph()")) == "break"
    assert "psdb.breakgraph() was called" in page


def test_report_recompile_shows_each_translation_and_reason(tmp_path, compile_all):
    translated = sot.symbolic_translate(compiled_fn)
    translated(_t(2, 3), _t(3, 4))
    # float64 inputs: the float32 entry's guard fails; the report says which one.
    page = Path(sot.report(compiled_fn, _t(2, 3, dtype="float64"), _t(3, 4, dtype="float64"),
                           path=tmp_path / "r.html")).read_text(encoding="utf-8")
    assert "translated again because the guards of the earlier cache entries failed" in page
    assert "x.dtype == paddle.float32" in page  # the failed guard of the first entry
    assert "x.dtype == paddle.float64" in page  # a guard of the new entry
    assert "float64" in page and "SIR compiled_fn(" in page


def test_report_twice_translated_in_one_call(tmp_path, compile_all):
    def twice(x):
        a = compiled_fn(x, paddle.ones([3, 4]))
        b = compiled_fn(x.astype("float64"), paddle.ones([3, 4], dtype="float64"))
        return a, b

    page = Path(sot.report(sot.skip_function(twice), _t(2, 3), path=tmp_path / "r.html")).read_text(
        encoding="utf-8")
    assert "translation 1 of 2" in page and "translation 2 of 2" in page
    assert page.count("guard(s) of this cache entry") >= 2
    assert "translated again because" in page


def test_report_layer_and_translated_function(tmp_path):
    page = Path(sot.report(Block(), _t(2, 3), path=tmp_path / "layer.html")).read_text(encoding="utf-8")
    assert "Block.forward" in page and "relu" in page
    translated = sot.symbolic_translate(small)
    page = Path(sot.report(translated, _t(2), path=tmp_path / "fn.html")).read_text(encoding="utf-8")
    assert _line_class(page, line_of(small, "return x + 1")) == "eager"
    # Served from the cache: the entries of the function are still shown.
    page = Path(sot.report(translated, _t(2), path=tmp_path / "again.html")).read_text(encoding="utf-8")
    assert "from the cache" in page and "x.shape == [2]" in page


def test_report_long_file_shows_regions(tmp_path):
    body = "\n".join(f"CONSTANT_{i} = {i}" for i in range(500))
    module = _import(tmp_path, "long_module", body + textwrap.dedent("""

        import paddle

        def late(x):
            return x * 2 - 1
    """))
    page = Path(sot.report(module.late, _t(2), path=tmp_path / "r.html")).read_text(encoding="utf-8")
    assert "not shown" in page
    assert "CONSTANT_10 = 10" not in page
    assert "return x * 2 - 1" in page


def _import(directory: Path, name: str, source: str):
    path = directory / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- a real browser -----------------------------------------------------------------------------------------------
def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def read_png(path: Path) -> tuple[int, int, np.ndarray]:
    """A tiny PNG decoder (8-bit RGB/RGBA, non-interlaced, as Chromium writes): (width, height, HxWx3 RGB)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat, header = 8, [], None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        chunk = data[position + 8:position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
        elif kind == b"IEND":
            break
    assert header is not None
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    out = np.zeros((height, stride), dtype=np.uint8)
    previous = np.zeros(stride, dtype=np.int32)
    for row in range(height):
        start = row * (stride + 1)
        kind = raw[start]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=start + 1).astype(np.int32)
        if kind == 0:
            current = line
        elif kind == 2:  # Up
            current = (line + previous) & 0xFF
        elif kind == 1:  # Sub: a running sum per channel
            current = (np.cumsum(line.reshape(width, channels), axis=0).reshape(-1)) & 0xFF
        else:  # Average / Paeth: sequential within the row
            values, up = line.tolist(), previous.tolist()
            result = [0] * stride
            for i in range(stride):
                left = result[i - channels] if i >= channels else 0
                upper = up[i]
                if kind == 3:
                    result[i] = (values[i] + ((left + upper) >> 1)) & 0xFF
                else:
                    corner = up[i - channels] if i >= channels else 0
                    estimate = left + upper - corner
                    pa, pb, pc = abs(estimate - left), abs(estimate - upper), abs(estimate - corner)
                    predictor = left if pa <= pb and pa <= pc else (upper if pb <= pc else corner)
                    result[i] = (values[i] + predictor) & 0xFF
            current = np.array(result, dtype=np.int32)
        out[row] = current
        previous = current
    pixels = out.reshape(height, width, channels)[:, :, :3]
    return width, height, pixels


def _count_colour(pixels: np.ndarray, colour: str, tolerance: int = 3) -> int:
    rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.int32)
    return int((np.abs(pixels.astype(np.int32) - rgb).max(axis=2) <= tolerance).sum())


SCREENSHOT_MODULE = '''
import paddle
import sot


def eager_only(x):
    z = x + 1
    sot.psdb.fallback()
    return z * 2


def scale(y):
    return paddle.nn.functional.relu(y) * 2


def dense(x, w):
    y = paddle.matmul(x, w)
    y = scale(y) + 1
    for _ in range(8):
        y = y * 1.5
    return y


def step(x, w):
    return dense(x, w), eager_only(x)
'''


def test_report_screenshot_in_headless_chromium(tmp_path):
    chromium = _chromium()
    if chromium is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    module = _import(tmp_path, "screenshot_model", SCREENSHOT_MODULE.lstrip())
    report_path = Path(sot.report(module.step, _t(2, 3), _t(3, 4), path=tmp_path / "report.html"))
    page = report_path.read_text(encoding="utf-8")
    assert 'class="line graph"' in page and 'class="line fallback"' in page
    png = tmp_path / "screenshot.png"
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", "--force-color-profile=srgb", "--hide-scrollbars",
               f"--user-data-dir={tmp_path / 'chromium-profile'}", f"--screenshot={png}", "--window-size=1200,900",
               report_path.resolve().as_uri()]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and png.exists(), f"chromium failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    width, height, pixels = read_png(png)
    assert (width, height) == (1200, 900)
    colours = REPORT.COLOURS
    # Whole rows of the source table are painted: hundreds of pixels of each colour.
    assert _count_colour(pixels, colours["graph"]) > 5000, "no 'compiled graph' line visible"
    assert _count_colour(pixels, colours["fallback"]) > 5000, "no 'fell back' line visible"
    assert _count_colour(pixels, colours["fail"]) > 2000, "no 'cause of a fallback' line visible"
    # Not a blank page: most of it is white background, with dark text on it.
    assert _count_colour(pixels, "#ffffff", 0) > width * height // 4
    assert int((pixels.max(axis=2) < 80).sum()) > 2000, "no text rendered"


def test_png_decoder_roundtrip(tmp_path):
    """The decoder against a PNG written here with every filter type."""
    width, height = 5, 5
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    raw = bytearray()
    previous = np.zeros(width * 3, dtype=np.int32)
    for row in range(height):
        line = image[row].reshape(-1).astype(np.int32)
        kind = row % 5
        left = np.concatenate([np.zeros(3, dtype=np.int32), line[:-3]])
        corner = np.concatenate([np.zeros(3, dtype=np.int32), previous[:-3]])
        if kind == 0:
            filtered = line
        elif kind == 1:
            filtered = line - left
        elif kind == 2:
            filtered = line - previous
        elif kind == 3:
            filtered = line - ((left + previous) >> 1)
        else:
            estimate = left + previous - corner
            pa, pb, pc = abs(estimate - left), abs(estimate - previous), abs(estimate - corner)
            filtered = line - np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, previous, corner))
        raw.append(kind)
        raw.extend((filtered & 0xFF).astype(np.uint8).tobytes())
        previous = line

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = tmp_path / "t.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                    + chunk(b"IDAT", zlib.compress(bytes(raw))) + chunk(b"IEND", b""))
    w, h, pixels = read_png(png)
    assert (w, h) == (width, height)
    np.testing.assert_array_equal(pixels, image)


def test_html_escape_helper_matches_stdlib():
    assert REPORT._esc("<a href='x'>&</a>") == html.escape("<a href='x'>&</a>", quote=True)
