"""`sot.report`: what the translator did, as a self-contained HTML page over the user's own source.

Every line of the user's files that took part is coloured by what happened to it: inside a compiled graph (a
SIR statement came from it), at a graph break, at the line that made its frame fall back, in a frame that ran
eagerly because it fell back, or in a frame kept eager because its graph was smaller than ``min_graph_size``.
Below each function come its translations: the SIR of each graph, the failure, the guards of each cache
entry and, for a frame translated more than once, which guard of the earlier entries failed (the recompile
reason). The page is plain HTML with inline CSS: no script, no network.

`Recorder` (also used by ``python -m sot run``) collects the translations of a stretch of code through the
translation listeners and times each one by wrapping the frame callback.
"""
from __future__ import annotations

import dataclasses
import html
import linecache
import os
import re
import time
import types
from typing import Any, Callable, Iterable

import paddle

from .eval_frame_ext import cache_entries, hit_count, set_callback
from .explain import FrameReport, _code_of
from .opcode_translator.callback import add_listener, frame_callback, remove_listener
from .opcode_translator.executor.function_graph import FrameInfo
from .opcode_translator.transform import Translation, describe_code

# Line classes, strongest first: a line touched by several translations shows the strongest one.
LINE_CLASSES = ("break", "fail", "graph", "fallback", "eager", "python")
COLOURS = {
    "graph": "#a8e6a8",     # a SIR statement of a compiled graph came from this line
    "python": "#eef7ee",    # another line of a compiled frame (Python around the graph)
    "break": "#ffb347",     # a graph break happened here
    "fail": "#ff8f8f",      # the line that made its frame fall back
    "fallback": "#ffdede",  # a line of a frame that fell back (ran eagerly)
    "eager": "#d6e4ff",     # a line of a frame kept eager (graph smaller than min_graph_size)
}
LEGEND = {
    "graph": "in a compiled graph",
    "python": "Python around a graph",
    "break": "graph break",
    "fail": "cause of a fallback",
    "fallback": "frame fell back (ran eagerly)",
    "eager": "kept eager (small graph)",
}
_LOCATION = re.compile(r"  @ (.+):(\d+)$")
# Files longer than this show only the regions around the lines that took part.
WHOLE_FILE_LINES = 400
CONTEXT_LINES = 3


@dataclasses.dataclass
class TranslationRecord(FrameReport):
    """One translation seen by a `Recorder`."""

    seconds: float | None = None  # wall time of the frame callback that produced it (None: not timed)
    recompile_reasons: list[str] = dataclasses.field(default_factory=list)  # per earlier cache entry
    cached: bool = False  # taken from the cache (translated before the recording started)

    @property
    def failure_kind(self) -> str:
        t = self.translation
        return "graph break" if t.kind == "break" or t.is_break else "fallback"

    @property
    def graph_class(self) -> str:
        """How the statements of its SIR ran: in a compiled program ("graph") or replayed eagerly."""
        return "graph" if self.translation.program is not None and self.translation.kind != "eager" else "eager"


class Recorder:
    """Collects translations while active (``with recorder:``); ``recorder.install()`` also installs a timed
    frame callback for the current thread, so that the time of each translation is known.

    Translations made under a callback installed by someone else (e.g. ``sot.symbolic_translate`` inside the
    recorded code) are recorded too, without a time.
    """

    def __init__(self) -> None:
        self.records: list[TranslationRecord] = []
        self.started = 0.0
        self.finished = 0.0
        self._hits_before = 0
        self._hits_after: int | None = None

    # -- listener ---------------------------------------------------------------------------------------
    def _listen(self, translation: Translation, frame: FrameInfo) -> None:
        reasons = []
        for number, (guard_fn, _) in enumerate(cache_entries(frame.code)):
            guard = getattr(guard_fn, "guard", None)
            if guard is None:
                continue
            try:
                failure = guard.first_failure(frame.globals, frame.closure, frame.args)
            except Exception as exc:  # never let the report break a translation
                failure = f"(could not evaluate the guards: {type(exc).__name__}: {exc})"
            reasons.append(f"entry {number}: {failure or 'all its guards pass for this call'}")
        # A translator that times itself (a ``seconds`` field on Translation) is preferred over our wrapper.
        seconds = getattr(translation, "seconds", None)
        self.records.append(TranslationRecord(frame.code, translation, seconds=seconds, recompile_reasons=reasons))

    def timed_callback(self, code: types.CodeType, globals_: dict, builtins_: dict, closure: tuple | None,
                       args: tuple) -> Any:
        """The frame callback, timed: the hook calls it on a cache miss."""
        count = len(self.records)
        start = time.perf_counter()
        try:
            return frame_callback(code, globals_, builtins_, closure, args)
        finally:
            if len(self.records) > count and self.records[-1].seconds is None:  # at most one per callback call
                self.records[-1].seconds = time.perf_counter() - start

    def __enter__(self) -> "Recorder":
        self.started = time.perf_counter()
        self._hits_before = hit_count()
        add_listener(self._listen)
        return self

    def __exit__(self, *exc: Any) -> None:
        remove_listener(self._listen)
        self._hits_after = hit_count()
        self.finished = time.perf_counter()

    def install(self) -> Any:
        """Install the timed callback for this thread; returns the previous callback (restore it with
        ``eval_frame_ext.set_callback``)."""
        return set_callback(self.timed_callback)

    # -- summary ----------------------------------------------------------------------------------------
    @property
    def cache_hits(self) -> int:
        after = hit_count() if self._hits_after is None else self._hits_after
        return after - self._hits_before

    def fresh(self) -> list[TranslationRecord]:
        return [r for r in self.records if not r.cached]

    def count(self, kind: str) -> int:
        return sum(1 for r in self.fresh() if r.translation.kind == kind)

    @property
    def compiled_programs(self) -> int:
        """Distinct compiled programs (equal SIRs share one)."""
        return len({id(r.translation.program) for r in self.fresh() if r.graph_class == "graph"})

    @property
    def graph_breaks(self) -> int:
        return sum(1 for r in self.fresh() if r.translation.failure is not None and r.failure_kind == "graph break")

    @property
    def translate_seconds(self) -> float:
        return sum(r.seconds or 0.0 for r in self.fresh())

    @property
    def timed(self) -> int:
        return sum(1 for r in self.fresh() if r.seconds is not None)

    def failures(self) -> list[tuple[str, str, str, str, int]]:
        """Graph breaks and fallbacks, deduplicated: (kind, location, function, reason, count), first seen
        first."""
        counts: dict[tuple[str, str, str, str], int] = {}
        for record in self.fresh():
            failure = record.translation.failure
            if failure is None:
                continue
            key = (record.failure_kind, str(failure.location or "?"), _qualname(record.code), failure.reason)
            counts[key] = counts.get(key, 0) + 1
        return [(*key, count) for key, count in counts.items()]

    def summary_lines(self, with_failures: bool = True) -> list[str]:
        fresh = self.fresh()
        kinds = dict.fromkeys(["compiled", "break", "eager", "fallback"], 0)
        for record in fresh:
            kinds[record.translation.kind] = kinds.get(record.translation.kind, 0) + 1
        words = {"compiled": "compiled whole", "break": "split at a graph break",
                 "eager": "kept eager (graph smaller than min_graph_size)", "fallback": "fell back to eager"}
        detail = ", ".join(f"{count} {words.get(kind, kind)}" for kind, count in kinds.items()
                           if count or kind in ("compiled", "fallback"))
        lines = [
            f"frames translated: {len(fresh)} ({detail})",
            f"graphs compiled:   {self.compiled_programs}",
            f"cache hits:        {self.cache_hits}",
            f"graph breaks:      {self.graph_breaks}",
            f"fallbacks:         {kinds['fallback']}",
        ]
        timing = f"time translating:  {self.translate_seconds:.3f} s"
        if fresh and self.timed < len(fresh):
            timing += (f" ({self.timed} of {len(fresh)} translations timed; those made under a callback "
                       "installed by sot.symbolic_translate are not)")
        lines.append(timing)
        failures = self.failures() if with_failures else []
        if failures:
            lines.append(f"graph breaks and fallbacks ({len(failures)} distinct):")
            width = max(len(location) for _, location, _, _, _ in failures)
            for kind, location, function, reason, count in failures:
                lines.append(f"  {kind:<11} x{count:<3} {location:<{width}}  in {function}: {reason}")
        return lines


def _qualname(code: types.CodeType) -> str:
    from .opcode_translator.pyversion import code_qualname

    return code_qualname(code)


def _code_lines(code: types.CodeType) -> tuple[int, int]:
    """First and last source line of a code object (decorators included)."""
    numbers = [line for _, _, line in code.co_lines() if line is not None]
    first = code.co_firstlineno
    return first, max([first, *numbers])


# -- HTML -----------------------------------------------------------------------------------------------
_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 16px 24px; color: #1d1d1f;
       background: #ffffff; font-size: 14px; }
h1 { font-size: 20px; margin: 0 0 6px 0; }
h2 { font-size: 16px; margin: 18px 0 6px 0; border-bottom: 1px solid #d0d0d0; padding-bottom: 3px; }
code, pre, .src { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
.summary { margin: 4px 0 8px 0; }
.summary td { padding: 0 14px 0 0; }
.legend span.chip { display: inline-block; padding: 1px 8px; margin: 0 6px 4px 0; border: 1px solid #bbb;
                    border-radius: 3px; font-size: 12px; }
ul.failures { margin: 4px 0; padding-left: 20px; }
ul.failures li { margin: 2px 0; }
table.src { border-collapse: collapse; width: 100%; table-layout: fixed; }
table.src td { padding: 0 6px; vertical-align: top; line-height: 1.35; }
table.src td.no { width: 44px; text-align: right; color: #888; user-select: none; border-right: 1px solid #ddd; }
table.src td.tags { width: 110px; white-space: nowrap; overflow: hidden; }
table.src td.code { white-space: pre; overflow: hidden; text-overflow: ellipsis; }
table.src tr.gap td { color: #999; background: #f6f6f6; }
a.tag { display: inline-block; font-size: 10.5px; line-height: 13px; padding: 0 3px; margin-right: 2px;
        border-radius: 2px; text-decoration: none; color: #fff; font-family: Arial, sans-serif; }
a.tag.graph { background: #2e8b2e; } a.tag.break { background: #d9730d; } a.tag.fail { background: #c62828; }
a.tag.fallback { background: #c96f6f; } a.tag.eager { background: #4a6fc9; } a.tag.python { background: #7aa07a; }
td.panel { padding: 6px 10px 10px 60px !important; background: #fafafa; border-top: 1px solid #e4e4e4;
           border-bottom: 1px solid #e4e4e4; white-space: normal; }
div.translation { margin: 4px 0 8px 0; }
div.translation .head { font-weight: 600; }
div.translation .kind-compiled { color: #1f7a1f; } div.translation .kind-fallback { color: #b22222; }
div.translation .kind-eager { color: #3558b5; } div.translation .kind-break { color: #b35900; }
pre.sir { background: #f0f7f0; border: 1px solid #cfe5cf; padding: 6px 8px; margin: 4px 0; white-space: pre-wrap;
          word-break: break-all; }
pre.sir.small { background: #f1f5ff; border-color: #d3ddf5; }
pre.guards { background: #f6f6f6; border: 1px solid #e0e0e0; padding: 4px 8px; margin: 2px 0; white-space: pre-wrap;
             word-break: break-all; }
.why { color: #8a4b00; }
.failure { color: #b22222; }
.muted { color: #777; }
details summary { cursor: default; color: #444; }
"""


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


@dataclasses.dataclass
class _Mark:
    cls: str
    label: str
    title: str
    anchor: str


class _Page:
    """Collects line marks and translation panels, then renders them."""

    def __init__(self, records: list[TranslationRecord]) -> None:
        self.records = records
        self.marks: dict[str, dict[int, list[_Mark]]] = {}
        self.anchors = {id(r): f"t{i + 1}" for i, r in enumerate(records)}
        self.numbers = {id(r): i + 1 for i, r in enumerate(records)}
        # Per code object, its translations (in order) and where its panel goes.
        self.by_code: dict[types.CodeType, list[TranslationRecord]] = {}
        for record in records:
            self.by_code.setdefault(record.code, []).append(record)
        self.file_index: dict[str, int] = {}
        self._collect()

    def _mark(self, filename: str, lines: Iterable[int], mark: _Mark) -> None:
        per_file = self.marks.setdefault(filename, {})
        for line in lines:
            existing = per_file.setdefault(line, [])
            if not any(m.cls == mark.cls and m.anchor == mark.anchor for m in existing):
                existing.append(mark)

    def _collect(self) -> None:
        for record in self.records:
            t = record.translation
            number, anchor = self.numbers[id(record)], self.anchors[id(record)]
            name = _qualname(record.code)
            first, last = _code_lines(record.code)
            span = range(first, last + 1)
            filename = record.code.co_filename
            if t.kind == "eager":
                ops = len(t.sir) if t.sir is not None else 0
                self._mark(filename, span, _Mark("eager", f"E{number}", f"{name}: kept eager, its graph has "
                                                 f"{ops} op(s) (translation #{number})", anchor))
            elif t.kind != "fallback":  # "compiled", or "break": a graph, then the rest in a resume function
                self._mark(filename, span, _Mark("python", f"#{number}", f"{name}: translated frame "
                                                  f"(translation #{number})", anchor))
                if t.failure is not None and t.failure.location is not None and t.failure.location.lineno:
                    self._mark(t.failure.location.filename, [t.failure.location.lineno],
                               _Mark("break", f"B{number}", f"graph break in {name}: {t.failure.reason}", anchor))
            if t.kind != "fallback":
                cls = record.graph_class
                for stmt in (t.sir.statements if t.sir is not None else []):
                    if stmt.location is not None and stmt.location.lineno:
                        what = "graph" if cls == "graph" else "eagerly replayed op"
                        title = f"{what} of {name} (translation #{number}): {stmt.kind} {stmt.name}"
                        self._mark(stmt.location.filename, [stmt.location.lineno],
                                   _Mark(cls, f"{'G' if cls == 'graph' else 'E'}{number}", title, anchor))
            else:
                failure = t.failure
                reason = failure.reason if failure is not None else "?"
                self._mark(filename, span, _Mark("fallback", f"F{number}", f"{name} fell back: {reason} "
                                                 f"(translation #{number})", anchor))
                if failure is not None and failure.location is not None and failure.location.lineno:
                    cls, label = ("break", f"B{number}") if t.is_break else ("fail", f"F{number}")
                    self._mark(failure.location.filename, [failure.location.lineno],
                               _Mark(cls, label, f"{record.failure_kind} in {name}: {reason}", anchor))

    # -- rendering ------------------------------------------------------------------------------------------
    def files(self) -> list[str]:
        ordered = []
        for record in self.records:
            ordered.append(record.code.co_filename)
        ordered.extend(self.marks)
        return [f for f in dict.fromkeys(ordered) if linecache.getlines(f)]

    def _panel_ends(self, filename: str) -> dict[int, list[types.CodeType]]:
        ends: dict[int, list[types.CodeType]] = {}
        for code in self.by_code:
            if code.co_filename == filename:
                ends.setdefault(_code_lines(code)[1], []).append(code)
        return ends

    def render_file(self, index: int, filename: str) -> str:
        source = linecache.getlines(filename)
        marks = self.marks.get(filename, {})
        ends = self._panel_ends(filename)
        if len(source) <= WHOLE_FILE_LINES:
            shown = set(range(1, len(source) + 1))
        else:
            shown = set()
            for line in list(marks) + list(ends):
                shown.update(range(max(1, line - CONTEXT_LINES), min(len(source), line + CONTEXT_LINES) + 1))
        rows = [f'<h2 id="f{index}">{_esc(filename)}</h2>', '<table class="src">']
        previous = 0
        for number in range(1, len(source) + 1):
            if number not in shown:
                continue
            if number != previous + 1:
                rows.append(f'<tr class="gap"><td class="no">&#8942;</td><td class="tags"></td>'
                            f'<td class="code">lines {previous + 1}-{number - 1} not shown</td></tr>')
            previous = number
            line_marks = marks.get(number, [])
            cls = next((c for c in LINE_CLASSES if any(m.cls == c for m in line_marks)), "")
            tags = "".join(f'<a class="tag {_esc(m.cls)}" href="#{_esc(m.anchor)}" title="{_esc(m.title)}">'
                           f'{_esc(m.label)}</a>' for m in self._ordered(line_marks))  # noqa: E501
            text = source[number - 1].rstrip("\r\n").expandtabs(4)
            style = f' style="background:{COLOURS[cls]}"' if cls else ""
            shown_marks = self._ordered(line_marks)
            title = f' title="{_esc("; ".join(m.title for m in shown_marks))}"' if line_marks else ""
            rows.append(f'<tr id="f{index}-L{number}" class="line {cls}"{style}{title}><td class="no">{number}</td>'
                        f'<td class="tags">{tags}</td><td class="code">{_esc(text) or " "}</td></tr>')
            for code in ends.get(number, []):
                rows.append(f'<tr class="panel"><td colspan="3" class="panel">{self.render_code(code)}</td></tr>')
        if previous < len(source):
            rows.append(f'<tr class="gap"><td class="no">&#8942;</td><td class="tags"></td>'
                        f'<td class="code">lines {previous + 1}-{len(source)} not shown</td></tr>')
        rows.append("</table>")
        return "\n".join(rows)

    @staticmethod
    def _ordered(marks: list[_Mark]) -> list[_Mark]:
        """The marks to show on a line: the strongest one per translation; "python" marks (they only say
        the line belongs to a translated frame) only where nothing else is."""
        best: dict[str, _Mark] = {}
        for mark in marks:
            kept = best.get(mark.anchor)
            if kept is None or LINE_CLASSES.index(mark.cls) < LINE_CLASSES.index(kept.cls):
                best[mark.anchor] = mark
        shown = list(best.values())
        strong = [m for m in shown if m.cls != "python"]
        return strong or shown[:1]

    def render_code(self, code: types.CodeType) -> str:
        records = self.by_code[code]
        parts = []
        for position, record in enumerate(records):
            parts.append(self.render_translation(record, position, len(records)))
        return "\n".join(parts)

    def render_translation(self, record: TranslationRecord, position: int, total: int) -> str:
        t = record.translation
        anchor = self.anchors[id(record)]
        name = _qualname(record.code)
        where = f"{os.path.basename(record.code.co_filename)}:{record.code.co_firstlineno}"
        ops = len(t.sir) if t.sir is not None else 0
        if t.kind == "compiled":
            what = f"compiled graph of {ops} op(s)"
        elif t.kind == "eager":
            what = f"kept eager: {ops} op(s), fewer than min_graph_size" if ops else "kept eager: no tensor op"
        elif t.kind == "break":
            before = ("were compiled" if record.graph_class == "graph" else "ran eagerly") if ops else "none"
            what = (f"graph break: the {ops} op(s) before it {before}; the rest of the frame continues in a resume "
                    "function" if ops else "graph break: no op before it; the rest of the frame continues in a "
                    "resume function")
        else:
            what = f"{record.failure_kind}: the frame runs eagerly"
        timing = f", translated in {record.seconds * 1000:.1f} ms" if record.seconds is not None else ""
        nth = f" &#8212; translation {position + 1} of {total}" if total > 1 else ""
        cached = " (from the cache: translated before this report started)" if record.cached else ""
        out = [f'<div class="translation" id="{_esc(anchor)}">',
               f'<div class="head">#{self.numbers[id(record)]} <code>{_esc(name)}</code> '
               f'<span class="muted">({_esc(where)})</span>{nth}: '
               f'<span class="kind-{_esc(t.kind)}">{_esc(what)}</span>{_esc(timing)}{_esc(cached)}</div>']
        if record.recompile_reasons:
            out.append('<div class="why">translated again because the guards of the earlier cache entries '
                       'failed:<br>' + "<br>".join(f"&#160;&#160;{_esc(r)}" for r in record.recompile_reasons)
                       + "</div>")
        if t.failure is not None:
            location = self.link(str(t.failure.location or "?"))
            out.append(f'<div class="failure">{_esc(record.failure_kind)} at <code>{location}</code>: '
                       f'{_esc(t.failure.reason)}</div>')
        if t.sir is not None and t.sir.statements:
            small = "" if record.graph_class == "graph" else " small"
            out.append(f'<pre class="sir{small}">{self.render_sir(t.sir.dump())}</pre>')
        guards = t.guard.readable if t.guard is not None else []
        is_open = " open" if total > 1 or record.recompile_reasons else ""
        out.append(f"<details{is_open}><summary>{len(guards)} guard(s) of this cache entry</summary>"
                   f'<pre class="guards">{_esc(chr(10).join(guards) or "(no guard: always valid)")}</pre>'
                   "</details>")
        out.append("</div>")
        return "\n".join(out)

    def link(self, location: str) -> str:
        """``file:line`` as a link to that line of the page (short file name), or escaped text."""
        filename, _, number = location.rpartition(":")
        index = self.file_index.get(filename)
        if index is None or not number.isdigit():
            return _esc(location)
        return (f'<a href="#f{index}-L{number}" title="{_esc(location)}">'
                f'{_esc(os.path.basename(filename))}:{_esc(number)}</a>')

    def render_sir(self, dump: str) -> str:
        """The SIR listing, each statement's ``@ file:line`` shortened to a link to that source line."""
        lines = []
        for line in dump.splitlines():
            match = _LOCATION.search(line)
            if match is None:
                lines.append(_esc(line))
                continue
            lines.append(f"{_esc(line[:match.start()])}  @ {self.link(f'{match.group(1)}:{match.group(2)}')}")
        return "\n".join(lines)

    def render(self, title: str, summary: list[str], failures: list[tuple[str, str, str, str, int]],
               notes: Iterable[str] = ()) -> str:
        files = self.files()
        file_index = self.file_index = {f: i for i, f in enumerate(files)}
        body = [f"<h1>{_esc(title)}</h1>"]
        body.append('<pre class="summary">' + _esc("\n".join(summary)) + "</pre>")
        body.extend(f'<p class="muted">{_esc(note)}</p>' for note in notes)
        body.append('<div class="legend">' + "".join(
            f'<span class="chip" style="background:{COLOURS[c]}">{_esc(LEGEND[c])}</span>'
            for c in LINE_CLASSES) + "</div>")
        if failures:
            body.append("<h2>Graph breaks and fallbacks</h2><ul class=\"failures\">")
            for kind, location, function, reason, count in failures:
                where = self.link(location)
                times = f" (&#215;{count})" if count > 1 else ""
                body.append(f"<li><b>{_esc(kind)}</b>{times} at <code>{where}</code> in <code>{_esc(function)}</code>: "
                            f"{_esc(reason)}</li>")
            body.append("</ul>")
        if not self.records:
            body.append('<p class="muted">No frame was translated (every call was served from the cache, or no '
                        "function of user code was called).</p>")
        for filename in files:
            body.append(self.render_file(file_index[filename], filename))
        orphans = [code for code in self.by_code if code.co_filename not in file_index]
        if orphans:
            body.append("<h2>Frames without readable source</h2>")
            for code in orphans:
                body.append(f'<p><code>{_esc(describe_code(code))}</code></p>{self.render_code(code)}')
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{_esc(title)}</title><style>{_CSS}</style></head>\n<body>\n"
                + "\n".join(body) + "\n</body></html>\n")


def render_html(recorder: Recorder, title: str, extra_summary: Iterable[str] = (),
                notes: Iterable[str] = ()) -> str:
    """The HTML page for what ``recorder`` saw."""
    summary = list(extra_summary) + recorder.summary_lines(with_failures=False)
    return _Page(recorder.records).render(title, summary, recorder.failures(), notes)


def write_html(recorder: Recorder, path: str | os.PathLike[str], title: str,
               extra_summary: Iterable[str] = (), notes: Iterable[str] = ()) -> str:
    text = render_html(recorder, title, extra_summary, notes)
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)
    return path


def _cached_records(code: types.CodeType | None) -> list[TranslationRecord]:
    """The cache entries of ``code`` (most recently used first), as records."""
    if code is None:
        return []
    records = []
    for guard_fn, _ in cache_entries(code):
        translation = getattr(guard_fn, "translation", None)
        if translation is not None:
            records.append(TranslationRecord(code, translation, cached=True))
    return records


def report(fn: Callable[..., Any], *args: Any, path: str | os.PathLike[str] = "sot-report.html",
           **kwargs: Any) -> str:
    """Run one translated call of ``fn`` (like `sot.explain`) and write the HTML report to ``path``;
    returns ``path``."""
    from .translate import _check_translatable

    target = getattr(fn, "__sot_translated__", None)
    recorder = Recorder()
    with recorder:
        if target is not None:  # already translated: its own runner installs its callback (not timed)
            fn(*args, **kwargs)
        else:
            _check_translatable(fn)
            previous = recorder.install()
            try:
                fn(*args, **kwargs)
            finally:
                set_callback(previous)
    own = _code_of(target if target is not None else fn)
    if own is not None and not any(r.code is own for r in recorder.records):
        recorder.records[:0] = _cached_records(own)
    layer = getattr(fn, "_layer", fn)
    if isinstance(layer, paddle.nn.Layer):
        name = f"{type(layer).__name__} (a {type(layer).__bases__[0].__name__})"
    else:
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
    notes = []
    if recorder.cache_hits:
        notes.append(f"{recorder.cache_hits} frame(s) were served from the cache: what was translated before this "
                     f"report started is not shown again (except the cache entries of {name} itself). Call "
                     "sot.reset() first to see every translation.")
    return write_html(recorder, path, f"sot report: {name}",
                      [f"one call of {name}, {recorder.finished - recorder.started:.3f} s"], notes)


__all__ = ["Recorder", "TranslationRecord", "render_html", "report", "write_html"]
