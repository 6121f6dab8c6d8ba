"""No page renders text from data or from the address as Markdown: a scan of the source.

Streamlit renders the body of ``st.markdown``, ``st.write``, the alerts, captions and
headings, and the labels of links, buttons, expanders and other widgets (and every
``help=`` tooltip) as Markdown: an image there is fetched from its host, a link is
drawn. Every such call in ``review_app/ui`` must be fed only with

* string literals (and f-strings, ``+`` and ``" ".join(...)`` built from them),
* the output of :mod:`review_app.ui.safe` (``escape``, ``code_span``, ``code_list``,
  ...), which shows data as literal text,
* numbers: an f-string field with a format spec (``{x:.2f}``, ``{n:d}``) or ``len(...)``.

Anything else (a name, an attribute, ``str(error)``) fails, with the file and line, so
a new page cannot forget. The safe module itself is what the scan trusts and is not
scanned; its own behaviour is tested in ``tests/test_untrusted_text.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UI = REPO / "review_app" / "ui"
SAFE_MODULE = "review_app.ui.safe"

# Calls whose first positional argument (or ``body=``) is rendered as Markdown.
BODY_CALLS = {
    "markdown",
    "write",
    "error",
    "warning",
    "info",
    "success",
    "exception",
    "caption",
    "title",
    "header",
    "subheader",
    "toast",
    "badge",
}
# Calls whose label (first positional, or ``label=``) is rendered as Markdown.
LABEL_CALLS = {
    "button",
    "download_button",
    "link_button",
    "form_submit_button",
    "expander",
    "popover",
    "status",
    "toggle",
    "checkbox",
    "selectbox",
    "multiselect",
    "radio",
    "pills",
    "segmented_control",
    "slider",
    "select_slider",
    "text_input",
    "text_area",
    "number_input",
    "date_input",
    "time_input",
    "color_picker",
    "file_uploader",
    "camera_input",
    "metric",
}
# Keyword arguments rendered as Markdown wherever they appear.
MARKDOWN_KEYWORDS = {"help", "label", "body", "caption", "captions"}
# ``page_link(page, label=...)``: the page is not text; only its label is.
LINK_CALLS = {"page_link"}
# Widgets whose options are drawn as Markdown (a list of labels).
OPTION_CALLS = {"tabs", "radio", "pills", "segmented_control"}


UNKNOWN = ast.Name(id="<data>")  # a value the scan cannot see (a parameter, a loop item)


def assignments(tree: ast.Module) -> dict[str, list[ast.expr]]:
    """Every value each plain name of the module is ever given: assignments, ``+=``,
    ``.append``/``.extend``, and (as unknown data) loop and comprehension targets,
    ``with ... as``, function parameters and imports. A name is only as safe as the
    least safe of them (names are not told apart by scope: the scan is conservative)."""
    found: dict[str, list[ast.expr]] = {}

    def bind(target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            found.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for item in target.elts:
                bind(item, UNKNOWN)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                bind(target, node.value)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            bind(node.target, node.value)
        elif isinstance(node, (ast.For, ast.comprehension)):
            bind(node.target, UNKNOWN)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            bind(node.optional_vars, UNKNOWN)
        elif isinstance(node, ast.arg):
            found.setdefault(node.arg, []).append(UNKNOWN)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                found.setdefault(alias.asname or alias.name, []).append(UNKNOWN)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "extend", "insert")
            and isinstance(node.func.value, ast.Name)
        ):
            for arg in node.args[-1:]:
                found.setdefault(node.func.value.id, []).append(arg)
    return found


class Scan(ast.NodeVisitor):
    def __init__(self, path: Path, tree: ast.Module) -> None:
        self.path = path
        self.safe_names: set[str] = set()  # from review_app.ui.safe import escape, ...
        self.safe_modules: set[str] = set()  # from review_app.ui import safe
        self.problems: list[str] = []
        self.values = assignments(tree)
        self.checking: set[str] = set()

    # --- what the safe module provides ---------------------------------------------------

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module == SAFE_MODULE:
            self.safe_names.update(alias.asname or alias.name for alias in node.names)
        elif node.module == "review_app.ui":
            self.safe_modules.update(
                alias.asname or alias.name for alias in node.names if alias.name == "safe"
            )
        self.generic_visit(node)

    def _is_safe_call(self, node: ast.expr) -> bool:
        if not isinstance(node, ast.Call):
            return False
        function = node.func
        if isinstance(function, ast.Name):
            return function.id in self.safe_names or function.id == "len"
        return (
            isinstance(function, ast.Attribute)
            and isinstance(function.value, ast.Name)
            and function.value.id in self.safe_modules
        )

    def allowed(self, node: ast.expr | None) -> bool:
        """Literal text, the safe module's output, or text composed only of those."""
        if node is None:
            return True
        if isinstance(node, ast.Constant):
            return node.value is None or isinstance(node.value, (str, bool, int, float))
        if isinstance(node, ast.JoinedStr):
            return all(self.allowed(part) for part in node.values)
        if isinstance(node, ast.FormattedValue):
            return node.format_spec is not None or self.allowed(node.value)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.allowed(node.left) and self.allowed(node.right)
        if isinstance(node, ast.IfExp):
            return self.allowed(node.body) and self.allowed(node.orelse)
        if isinstance(node, (ast.List, ast.Tuple)):
            return all(self.allowed(item) for item in node.elts)
        if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
            return self.allowed(node.elt)
        if isinstance(node, ast.Name):
            return self._allowed_name(node.id)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "join"
            and isinstance(node.func.value, ast.Constant)
        ):
            return all(self.allowed(arg) for arg in node.args)
        return self._is_safe_call(node)

    def _allowed_name(self, name: str) -> bool:
        """A name every value of which is allowed (a cycle counts as allowed: it adds
        nothing the other values do not)."""
        if name in self.checking:
            return True
        values = self.values.get(name)
        if not values:
            return False
        self.checking.add(name)
        try:
            return all(value is not UNKNOWN and self.allowed(value) for value in values)
        finally:
            self.checking.discard(name)

    # --- the calls --------------------------------------------------------------------------

    def _check(self, node: ast.expr | None, call: ast.Call, what: str) -> None:
        if not self.allowed(node):
            shown = ast.unparse(node) if node is not None else ""
            self.problems.append(
                f"{self.path.relative_to(REPO)}:{call.lineno}: {what} is rendered as "
                f"Markdown from {shown!r}; show data with review_app.ui.safe"
            )

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        name = function.attr if isinstance(function, ast.Attribute) else None
        if name is not None:
            first = node.args[0] if node.args else None
            if name in BODY_CALLS:
                for arg in node.args if name == "write" else node.args[:1]:
                    self._check(arg, node, f"{name}()")
            elif name in LABEL_CALLS:
                self._check(first, node, f"{name}() label")
            if name in OPTION_CALLS and name == "tabs":
                self._check(first, node, "tabs() labels")
            elif name in OPTION_CALLS and len(node.args) > 1:
                self._check(node.args[1], node, f"{name}() options")
            if name in (BODY_CALLS | LABEL_CALLS | LINK_CALLS | OPTION_CALLS):
                for keyword in node.keywords:
                    if keyword.arg in MARKDOWN_KEYWORDS:
                        self._check(keyword.value, node, f"{name}({keyword.arg}=...)")
                    if keyword.arg == "unsafe_allow_html":
                        self.problems.append(
                            f"{self.path.relative_to(REPO)}:{node.lineno}: unsafe_allow_html"
                        )
        self.generic_visit(node)


def scan(path: Path, *, shown_as: Path | None = None) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = Scan(shown_as or path, tree)
    found.visit(tree)
    return found.problems


def ui_sources() -> list[Path]:
    return sorted(p for p in UI.rglob("*.py") if p.name != "safe.py")


def test_every_page_and_view_is_scanned() -> None:
    names = {p.relative_to(UI).as_posix() for p in ui_sources()}
    for page in (
        "app.py",
        "common.py",
        "session.py",
        "cached.py",
        "views/queue.py",
        "views/adjudicate.py",
    ):
        assert page in names
    assert len([n for n in names if n.startswith("views/")]) >= 8


def test_no_page_renders_data_as_markdown() -> None:
    problems = [problem for path in ui_sources() for problem in scan(path)]
    assert problems == [], "\n" + "\n".join(problems)


def test_the_scan_catches_what_it_should(tmp_path: Path) -> None:
    """The scan itself can fail: each unsafe form is reported, each safe one is not."""
    source = tmp_path / "page.py"
    source.write_text(
        "import streamlit as st\n"
        "from review_app.ui.safe import code_span, escape\n"
        "from review_app.ui import safe\n"
        "case_id = st.query_params.get('case')\n"
        "st.error(str(error))\n"  # 5
        "st.subheader(f'{case_id} · turn {turn}')\n"  # 6
        "cells.page_link(page, label=row.case_id, query_params={})\n"  # 7
        "st.caption(', '.join(reasons))\n"  # 8
        "st.button(label.code, key='x')\n"  # 9
        "st.expander(f'Definition of {code}')\n"  # 10
        "st.write('fine', value)\n"  # 11
        "st.selectbox('Pick', options, help=note)\n"  # 12
        "st.markdown(text, unsafe_allow_html=True)\n"  # 13
        "st.error('literal')\n"
        "st.subheader(f'{escape(case_id)} · turn {turn:d}')\n"
        "cells.page_link(page, label=safe.escape(row.case_id))\n"
        "st.caption(', '.join(code_span(c) for c in codes))\n"
        "st.info(f'{len(rows)} rows' + ('' if ok else ' (some missing)'))\n"
        "st.text(anything)\n"
        "st.code(anything)\n"
        "for title in ('a', 'b'):\n"
        "    st.caption(title)\n"  # 22: a loop item is data to the scan
        "meta = ['lane ' + code_span(lane)]\n"
        "meta.append(f'version {version:d}')\n"
        "st.caption(' · '.join(meta))\n"
        "parts = ['fine']\n"
        "parts.append(reason)\n"
        "st.caption(' · '.join(parts))\n"  # 28: one unsafe value makes the name unsafe
        "def show(message):\n"
        "    st.error(message)\n"  # 30: a parameter is data
        "    st.error(escape(message))\n"
    )
    found = [line.split(":")[1] for line in scan_outside(source)]
    assert found == ["5", "6", "7", "8", "9", "10", "11", "12", "13", "13", "22", "28", "30"]


def scan_outside(path: Path) -> list[str]:
    """:func:`scan` for a file outside the repository (named by its bare name)."""
    return scan(path, shown_as=REPO / path.name)


def magic_expressions(path: Path) -> list[str]:
    """Expression statements Streamlit's "magic" would draw with ``st.write`` (as
    Markdown): any but a call, ``yield``, ``await`` or a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docstrings = {
        id(node.body[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    }
    drawn = (ast.Call, ast.Yield, ast.YieldFrom, ast.Await)
    return [
        f"{path.name}:{node.lineno}: a bare expression (magic would draw it)"
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and not isinstance(node.value, drawn)
        and id(node) not in docstrings
    ]


def test_no_page_relies_on_magic() -> None:
    """``serve`` turns Streamlit's magic off (review_app/cli/server.py): a bare expression
    in the entry script or a page would be drawn in AppTest, not for people."""
    from review_app.cli.server import streamlit_flags

    flags = streamlit_flags(port=8501, host="127.0.0.1")
    assert flags[flags.index("--runner.magicEnabled") + 1] == "false"
    scripts = [UI / "app.py", *sorted((UI / "views").glob("*.py"))]
    assert len(scripts) >= 9
    problems = [problem for path in scripts for problem in magic_expressions(path)]
    assert problems == [], "\n" + "\n".join(problems)


def test_the_magic_scan_catches_bare_expressions(tmp_path: Path) -> None:
    source = tmp_path / "page.py"
    source.write_text(
        '"""A docstring."""\n'
        "import streamlit as st\n"
        "st.title('fine')\n"
        "'drawn'\n"
        "def helper():\n"
        '    """A docstring."""\n'
        "    value = 1\n"
        "    value\n",
        encoding="utf-8",
    )
    assert magic_expressions(source) == [
        "page.py:4: a bare expression (magic would draw it)",
        "page.py:8: a bare expression (magic would draw it)",
    ]
