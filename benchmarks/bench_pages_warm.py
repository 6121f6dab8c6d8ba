"""Warm page loads on the demo beside a bare Streamlit page, in one run, in Chromium.

    PYTHONPATH=. python benchmarks/bench_pages_warm.py [--rounds 3] [--before DIR]
        [--modes browser,tab,nav]

Prints figures; asserts nothing (the machine is shared and noisy, so everything is
measured in one run, visits alternating between the servers).

Servers, each a ``serve`` of its own copy of the demo (17 conversations), signed in
through local mode as ``lee`` (an admin), with the flags ``review-app serve`` gives
Streamlit:

- ``floor``: a bare Streamlit page (a title and a line of text, in a two-page app opened
  by the page's address), the least a new browser session costs on this machine
  (Streamlit's page, its scripts, the websocket, one script run);
- ``after``: this checkout's app;
- ``before`` (with ``--before DIR``, another checkout, e.g. a worktree of main): its app.

Per policy-owner page (queue, agreement, judge, adjudicate, export, import, rubrics,
team): the time from the navigation's start to the page settled (its title drawn and
the script no longer running), both read in the page itself (Playwright's own round
trips to a busy browser would add up to a second more), in three modes (``--modes``):

- ``browser``: a new browser context per visit, so nothing is cached (what
  ``bench_pages_large.py`` measures: a first-time visitor, who downloads and compiles
  Streamlit's scripts);
- ``tab``: a new tab per visit in one context per server (a person who has used the app
  before: the browser has Streamlit's scripts, the server starts a new session);
- ``nav``: one tab per server kept open, each page reached by its link in the sidebar
  from the page before (a person moving through the app: the same session, no new page
  load; timed from the click).

The first round is cold (the first visit of a page on a fresh server) and left out;
printed per mode: the median of the ``--rounds`` warm rounds per server, the floor
measured beside that page (a floor visit follows each page's visits), the app's excess
over the floor, and where a visit's time goes (phases, from the browser's navigation
timing and the websocket's messages). Target (issue 23): warm under 1 s on the demo.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_pages_large import IDLE, _title  # noqa: E402
from benchmarks.large_db import LOCAL_USER, load_demo_database  # noqa: E402
from benchmarks.summary import record  # noqa: E402
from review_app.cli.server import streamlit_flags  # noqa: E402


@dataclass(frozen=True)
class Page:
    name: str
    address: str
    title: str
    """The page's title (its h1): the page has drawn once it is there."""

    @property
    def ready(self) -> str:
        return _title(self.title)


POLICY_PAGES = (
    Page("queue", "queue", "Queue"),
    Page("agreement", "agreement", "Agreement"),
    Page("judge", "judge", "Judge calibration"),
    Page("adjudicate", "adjudicate", "Adjudicate"),
    Page("export", "export", "Export"),
    Page("import", "import", "Import"),
    Page("rubrics", "rubrics", "Rubrics"),
    Page("team", "team", "Team"),
)
FLOOR = Page("floor", "hello", "Hello")
FLOOR_SCRIPT = """import streamlit as st


def hello():
    st.title("Hello")
    st.write("A bare page.")


def other():
    st.title("Other")


st.navigation(
    [st.Page(other, title="Other", default=True), st.Page(hello, title="Hello", url_path="hello")]
).run()
"""
"""The floor: a bare page of a two-page app, opened by its address as the app's pages
are (Streamlit's page first asks whether the app is served under that path, then at
the root: a deep link costs a request and a 0.1 s retry delay more than the root)."""


@contextmanager
def started(command: list[str], env: dict[str, str], root: Path) -> Iterator[str]:
    """A server from ``command`` (its log in ``root``); its address once healthy."""
    from tests.served import free_port, wait_healthy

    port = free_port()
    command = [part.replace("{port}", str(port)) for part in command]
    root.mkdir(parents=True, exist_ok=True)
    log = root / "server.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=root
        )
    try:
        address = f"http://127.0.0.1:{port}"
        wait_healthy(address, process, log)
        yield address
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _app(stack: ExitStack, tree: Path, database: Path, root: Path) -> str:
    env = dict(os.environ)
    env.update(
        {
            "PYTHONPATH": str(tree),
            "REVIEW_APP_DATABASE_URL": f"sqlite:///{database}",
            "REVIEW_APP_AUTH": "local",
            "REVIEW_APP_LOCAL_USER": LOCAL_USER,
            "HOME": str(root / "home"),
        }
    )
    env.pop("REVIEW_APP_PROXY_HEADER", None)
    env.pop("REVIEW_APP_RUBRICS_DIR", None)
    command = [sys.executable, "-m", "review_app", "serve", "--port", "{port}"]
    command += ["--host", "127.0.0.1"]
    return stack.enter_context(started(command, env, root))


def _floor(stack: ExitStack, root: Path) -> str:
    root.mkdir(parents=True, exist_ok=True)
    script = root / "hello.py"
    script.write_text(FLOOR_SCRIPT, encoding="utf-8")
    env = dict(os.environ)
    env["HOME"] = str(root / "home")
    # the options review-app serve gives Streamlit (a bare page, the same server)
    flags = streamlit_flags(port=0, host="127.0.0.1")
    flags[flags.index("--server.port") + 1] = "{port}"
    command = [sys.executable, "-m", "streamlit", "run", str(script), *flags]
    return stack.enter_context(started(command, env, root))


# In the page, in ms since the navigation began: the websocket's opening, its first and
# last message from the server (Streamlit sends a new session's first message when the
# script starts, its last when the script has finished), when the script state last
# became "notRunning", and when each title (h1 of the main area) first appeared.
IN_PAGE_TIMES = """(() => {
  const times = (window.__times = {open: null, first: null, last: null, messages: 0,
                                    idle: null, titles: {}});
  const Native = window.WebSocket;
  function Timed(...args) {
    const socket = new Native(...args);
    socket.addEventListener("open", () => { times.open = performance.now(); });
    socket.addEventListener("message", () => {
      const now = performance.now();
      if (times.first === null) times.first = now;
      times.last = now;
      times.messages += 1;
    });
    return socket;
  }
  Timed.prototype = Native.prototype;
  for (const name of ["CONNECTING", "OPEN", "CLOSING", "CLOSED"]) Timed[name] = Native[name];
  window.WebSocket = Timed;
  let state = null;
  const look = () => {
    const now = performance.now();
    const app = document.querySelector('[data-testid="stApp"]');
    const current = app ? app.getAttribute("data-test-script-state") : null;
    if (current === "notRunning") {
      // A new session: the state's change to notRunning. After a click in a kept tab
      // (nav), a short script can start and finish between two looks, so the state
      // seen does not change: the first look at notRunning after the server's last
      // message counts.
      if (current !== state) times.idle = now;
      else if (times.clicked !== undefined && times.last !== null &&
               (times.idle === null || times.idle < times.last)) times.idle = now;
    }
    state = current;
    for (const title of document.querySelectorAll('[data-testid="stMain"] h1')) {
      const text = title.textContent.trim();
      if (!(text in times.titles)) times.titles[text] = now;
    }
  };
  new MutationObserver(look).observe(document, {subtree: true, childList: true,
                                                attributes: true});
})();"""

PHASES_JS = """() => {
  const navigation = performance.getEntriesByType("navigation")[0];
  const t = window.__times;
  return {html: navigation.responseEnd, scripts: navigation.domContentLoadedEventEnd,
          open: t.open, first: t.first, last: t.last, idle: t.idle, titles: t.titles,
          seen: performance.now()};
}"""
PHASES = ("html", "scripts", "open", "first", "last", "settled", "seen")
"""A visit's phases: the page's HTML received; its scripts run (DOMContentLoaded); the
websocket open; the server's first message (the script has started); its last (the
script has finished); the page settled (its title drawn and the script state
"notRunning", both seen in the page); the benchmark saw it settled (Playwright's
round trips to a busy browser add up to a second or more)."""


def visit(context: Any, url: str, page: Page) -> dict[str, float]:
    """A visit of ``page`` in a new tab of ``context`` (a new Streamlit session): its
    phases in seconds since the navigation began (``settled``: the page's load time)."""
    tab = context.new_page()
    try:
        tab.goto(f"{url}/{page.address}")
        tab.wait_for_selector(page.ready, state="attached", timeout=120_000)
        tab.wait_for_selector(IDLE, state="attached", timeout=120_000)
        times = tab.evaluate(PHASES_JS)
        title = times["titles"][page.title]
        times["settled"] = max(title, times["idle"])
        return {phase: (times[phase] or 0.0) / 1000 for phase in PHASES}
    finally:
        tab.close()


NAVIGATE_JS = """(address) => {
  const link = [...document.querySelectorAll('[data-testid="stSidebarNavLink"]')]
    .find((a) => new URL(a.href).pathname === "/" + address);
  if (!link) return null;
  const t = window.__times;
  Object.assign(t, {idle: null, first: null, last: null, titles: {}});
  t.clicked = performance.now();
  link.click();
  return t.clicked;
}"""
"""Click the sidebar link to ``address`` after forgetting the page's times (null: no link)."""
NAVIGATED_JS = """(title) => {
  const t = window.__times;
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute("data-test-script-state") !== "notRunning") return null;
  if (t.last === null || t.idle === null || t.idle < t.last || !(title in t.titles)) {
    return null;
  }
  const since = (time) => (time === null ? 0 : time - t.clicked);
  return {first: since(t.first), last: since(t.last),
          settled: Math.max(t.idle, t.titles[title]) - t.clicked};
}"""
PHASE_NAMES = {
    "html": "html received",
    "scripts": "scripts run",
    "open": "websocket open",
    "first": "first message (script started)",
    "last": "last message (script finished)",
    "settled": "settled",
    "seen": "seen by the benchmark",
}
NAV_PHASES = ("first", "last", "settled")
"""A navigation's phases, since the click: the server's first message (the script has
started), its last (the script has finished), the page settled."""


def navigate(tab: Any, page: Page) -> dict[str, float]:
    """Go to ``page`` in ``tab`` by its sidebar link (the same Streamlit session): its
    phases in seconds since the click (``settled``: the page's load time)."""
    if tab.evaluate(NAVIGATE_JS, page.address) is None:
        raise RuntimeError(f"no sidebar link to /{page.address} in {tab.url}")
    times = tab.wait_for_function(NAVIGATED_JS, arg=page.title, timeout=120_000).json_value()
    return {phase: times[phase] / 1000 for phase in NAV_PHASES}


MODES = {
    "browser": "a new browser context per visit: nothing cached (a first-time visitor)",
    "tab": "a new tab per visit in one context per server: Streamlit's scripts cached",
    "nav": "one tab per server, each page reached by its sidebar link: the same session",
}
FLOOR_AWAY = Page("floor-away", "", "Other")
"""The bare app's other page: the floor's tab goes there before each timed navigation."""
Visits = dict[tuple[str, str, str], list[dict[str, float]]]
"""(mode, page, server) -> each round's visit, round 0 cold."""


def measure(
    servers: dict[str, str], *, modes: list[str], rounds: int, viewport: dict[str, int]
) -> Visits:
    """Every page on every server in every mode, ``rounds + 1`` times; a floor visit after
    each page's visits (``servers["floor"]``)."""
    from tests.served import chromium

    visits: Visits = {}
    apps = [name for name in servers if name != "floor"]
    with chromium() as browser:
        kept = {name: browser.new_context(viewport=viewport) for name in servers}
        for context in kept.values():
            context.add_init_script(IN_PAGE_TIMES)
        tabs = {}
        if "nav" in modes:
            for name, context in kept.items():
                start = FLOOR if name == "floor" else POLICY_PAGES[-1]
                tabs[name] = context.new_page()
                tabs[name].goto(f"{servers[name]}/{start.address}")
                tabs[name].wait_for_selector(start.ready, state="attached", timeout=120_000)
                tabs[name].wait_for_selector(IDLE, state="attached", timeout=120_000)
        for round_ in range(rounds + 1):
            for page in POLICY_PAGES:
                # alternate which app goes first, so neither always follows the floor
                order = apps if round_ % 2 == 0 else apps[::-1]
                for mode in modes:
                    for name, shown in [*((n, page) for n in order), ("floor", FLOOR)]:
                        if mode == "nav":
                            if name == "floor":
                                navigate(tabs[name], FLOOR_AWAY)
                            measured = navigate(tabs[name], shown)
                        elif mode == "tab":
                            measured = visit(kept[name], servers[name], shown)
                        else:
                            context = browser.new_context(viewport=viewport)
                            context.add_init_script(IN_PAGE_TIMES)
                            try:
                                measured = visit(context, servers[name], shown)
                            finally:
                                context.close()
                        visits.setdefault((mode, page.name, name), []).append(measured)
        for tab in tabs.values():
            tab.close()
        for context in kept.values():
            context.close()
    return visits


def report(visits: Visits, modes: list[str], apps: list[str]) -> None:
    def warm(mode: str, page: str, name: str) -> float:
        return statistics.median(v["settled"] for v in visits[(mode, page, name)][1:])

    for mode in modes:
        print(f"\n{mode}: {MODES[mode]}")
        print(
            "warm load, s (median of the warm rounds); -floor: the app's excess over the bare "
            "Streamlit page measured beside it"
        )
        print(
            f"{'page':<11} {'floor':>6}"
            + "".join(f" {name:>7} {'-floor':>7}" for name in apps)
            + "  target: < 1 s"
        )
        for page in POLICY_PAGES:
            floor = warm(mode, page.name, "floor")
            cells = "".join(
                f" {warm(mode, page.name, n):7.2f} {warm(mode, page.name, n) - floor:7.2f}"
                for n in apps
            )
            last = warm(mode, page.name, apps[-1])
            print(f"{page.name:<11} {floor:6.2f}{cells}  {'met' if last < 1.0 else 'MISSED'}")
            record(
                f"{page.name} page, warm load on the demo in Chromium ({mode}; bare page beside)",
                f"{last:.2f} s (bare Streamlit page {floor:.2f} s)",
                target="< 1 s",
                met=last < 1.0,
            )
        phases = NAV_PHASES if mode == "nav" else PHASES
        since = "the click" if mode == "nav" else "the navigation began"
        shown = ", ".join(PHASE_NAMES[phase] for phase in phases)
        print(f"phases, s since {since} (median of the warm rounds): {shown}")
        print(f"{'page':<11} {'server':<7}" + "".join(f" {phase:>8}" for phase in phases))
        rows = [
            (page.name, name, visits[(mode, page.name, name)][1:])
            for page in POLICY_PAGES
            for name in apps
        ]
        every_floor = [v for p in POLICY_PAGES for v in visits[(mode, p.name, "floor")][1:]]
        for label, name, measured in [*rows, ("(every)", "floor", every_floor)]:
            medians = [statistics.median(v[phase] for v in measured) for phase in phases]
            print(f"{label:<11} {name:<7}" + "".join(f" {m:8.3f}" for m in medians))
    first = modes[0]
    print(f"\ncold: the first visit of each page on the fresh servers ({first} mode), s")
    for page in POLICY_PAGES:
        print(
            f"{page.name:<11} "
            + " ".join(f"{n} {visits[(first, page.name, n)][0]['settled']:.2f}" for n in apps)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="warm visits per page and server")
    parser.add_argument("--before", type=Path, help="another checkout to measure beside this one")
    parser.add_argument(
        "--modes", default="browser,tab,nav", help="a comma-separated choice of browser, tab, nav"
    )
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    args = parser.parse_args()
    modes = [mode for mode in args.modes.split(",") if mode]
    if not modes or any(mode not in MODES for mode in modes):
        parser.error(f"--modes: a comma-separated choice of {', '.join(MODES)}")
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as stack:
        root = Path(scratch)
        demo = root / "demo.db"
        load_demo_database(demo)
        trees = {"after": REPO} if args.before is None else {"before": args.before, "after": REPO}
        servers = {}
        for name, tree in trees.items():
            copy = root / f"{name}.db"
            shutil.copyfile(demo, copy)
            servers[name] = _app(stack, tree.resolve(), copy, root / f"server-{name}")
        servers["floor"] = _floor(stack, root / "server-floor")
        visits = measure(
            servers,
            modes=modes,
            rounds=args.rounds,
            viewport={"width": args.width, "height": args.height},
        )
    report(visits, modes, list(trees))


if __name__ == "__main__":
    main()
