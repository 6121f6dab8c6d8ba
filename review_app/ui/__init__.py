"""The Streamlit application. ``app.py`` only routes; each page is widgets plus one
call into a service. Around the pages: :mod:`review_app.ui.session` (every session-state
key, initialised in one place), :mod:`review_app.ui.cached` (reads shared between
sessions: the engine, the rubric catalog, case views, reports), :mod:`review_app.ui.registry`
(the pages and their addresses) and :mod:`review_app.ui.common` (what pages share)."""
