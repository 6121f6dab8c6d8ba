"""Which turns of a long conversation the review page draws.

A case may hold 100,000 events; drawing every one made a 10,000-turn case take over a
minute to open (about 100,000 DOM nodes) and every key press redraw them all. A case of
more than :data:`LONG_CASE_EVENTS` events is drawn as a window of
:data:`WINDOW_EVENTS` events on each side of the focused turn, plus the first violation
with the event before it (the first break, where a reviewer looks first), in case order.
The window stays put while the focus moves inside it, and is centred on the focus again
when the focus comes within :data:`WINDOW_MARGIN` events of an edge it may go past (a
``J`` at the window's last turn draws the next stretch). Moving the window by hand
(earlier or later turns) keeps it where it was put until the focus moves.

Pure: positions in, positions out.
"""

from __future__ import annotations

from dataclasses import dataclass

LONG_CASE_EVENTS = 120
"""Cases of more events are drawn as a window."""
WINDOW_EVENTS = 30
"""Events drawn before and after the focused one."""
WINDOW_MARGIN = 5
"""The focus this close to an edge the window could move past re-centres it."""


@dataclass(frozen=True)
class TurnWindow:
    """What to draw of a case's events (their positions, 0-based, in case order)."""

    n_events: int
    start: int
    end: int
    """The window: positions ``start`` to ``end - 1``."""
    anchor: int | None
    """The focused position the window was last placed for (kept between runs)."""
    first_break: int | None
    segments: tuple[tuple[int, int], ...]
    """``(start, end)`` ranges drawn, in order: the window, and the first break when it
    lies outside it."""

    @property
    def whole(self) -> bool:
        return self.segments == ((0, self.n_events),)

    @property
    def drawn(self) -> list[int]:
        """The positions drawn, in order."""
        return [index for start, end in self.segments for index in range(start, end)]

    def shifted(self, events: int) -> TurnWindow:
        """The window moved by ``events`` (negative: earlier), within the case; it stays
        there until the focus moves."""
        size = self.end - self.start
        start = max(0, min(self.n_events - size, self.start + events))
        return _with_break(self.n_events, start, start + size, self.anchor, self.first_break)


def turn_window(
    n_events: int,
    *,
    focus: int | None,
    first_break: int | None,
    kept: tuple[int, int, int | None] | None = None,
) -> TurnWindow:
    """The events to draw: every one of a short case; of a long one, a window around
    ``focus`` (a position) and ``first_break`` (the position of the first violation).

    ``kept`` is the window of the page's last run, ``(start, end, anchor)``: it stays
    while the focus is still ``anchor`` (the window was moved by hand) or comfortably
    inside it.
    """
    if n_events <= LONG_CASE_EVENTS:
        return TurnWindow(n_events, 0, n_events, focus, first_break, ((0, n_events),))
    if kept is not None and 0 <= kept[0] < kept[1] <= n_events:
        start, end, anchor = kept
        if focus is None or focus == anchor or _inside(focus, start, end, n_events):
            return _with_break(n_events, start, end, focus, first_break)
    centre = 0 if focus is None else focus
    start = max(0, centre - WINDOW_EVENTS)
    end = min(n_events, centre + WINDOW_EVENTS + 1)
    return _with_break(n_events, start, end, focus, first_break)


def _inside(focus: int, start: int, end: int, n_events: int) -> bool:
    low = start if start == 0 else start + WINDOW_MARGIN
    high = end if end == n_events else end - WINDOW_MARGIN
    return low <= focus < high


def _with_break(
    n_events: int, start: int, end: int, anchor: int | None, first_break: int | None
) -> TurnWindow:
    segments = [(start, end)]
    if first_break is not None and not start <= first_break < end:
        extra = (max(0, first_break - 1), first_break + 1)
        segments = sorted([*segments, extra])
        if segments[0][1] >= segments[1][0]:  # touching: one range
            segments = [(segments[0][0], max(segments[0][1], segments[1][1]))]
    return TurnWindow(n_events, start, end, anchor, first_break, tuple(segments))
