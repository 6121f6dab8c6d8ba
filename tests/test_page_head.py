"""The early-key listener in the head of the page the server sends (review_app/ui/page_head.py)."""

from __future__ import annotations

from pathlib import Path

from review_app.ui.page_head import EARLY, patched_index, static_dir_with_early_keys


def _static(root: Path, index: str) -> Path:
    (root / "static" / "js").mkdir(parents=True)
    (root / "static" / "js" / "main.js").write_text("console.log(1)")
    (root / "favicon.png").write_bytes(b"\x89PNG")
    (root / "index.html").write_text(index, encoding="utf-8")
    return root


def test_the_script_comes_first_in_the_head_and_everything_else_is_linked(
    tmp_path: Path,
) -> None:
    index = '<!doctype html><html><head><meta charset="utf-8"><script src="x.js"></script>'
    original = _static(tmp_path / "streamlit", index + "</head><body></body></html>")
    served = static_dir_with_early_keys(original, tmp_path / "served")
    assert served is not None
    text = (served / "index.html").read_text(encoding="utf-8")
    script = EARLY.read_text(encoding="utf-8")
    assert text.index("<head>") < text.index(script) < text.index('<meta charset="utf-8">')
    assert text.count("__reviewKeyBuffer = []") == 1
    assert (served / "static").is_symlink() and (served / "favicon.png").is_symlink()
    assert (served / "static" / "js" / "main.js").read_text() == "console.log(1)"
    assert (original / "index.html").read_text(encoding="utf-8").count("__reviewKeyBuffer") == 0


def test_a_page_without_a_head_is_left_alone(tmp_path: Path) -> None:
    assert patched_index("<html><body></body></html>", "<script></script>") is None
    original = _static(tmp_path / "streamlit", "<html><body></body></html>")
    assert static_dir_with_early_keys(original, tmp_path / "served") is None
    assert not (tmp_path / "served").exists()


def test_the_installed_streamlit_page_has_a_head() -> None:
    """The launcher's patch depends on it: a Streamlit upgrade that drops ``<head>``
    would silently fall back to the listener drawn by the first run."""
    from streamlit import file_util

    index = Path(file_util.get_static_dir()) / "index.html"
    assert patched_index(index.read_text(encoding="utf-8"), "<script></script>") is not None
