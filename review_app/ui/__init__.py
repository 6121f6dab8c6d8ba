"""The Streamlit application. ``app.py`` only routes; each page is widgets plus one call
into a service.

Modules:

- ``app``: the entry script: page setup, sign-in, routing;
- ``views``: the pages, one script each (their addresses and roles are in ``registry``);
- ``registry``: every page of the app: its script, title, icon, address and the least role
  that may use it (``pages_for``, ``page``);
- ``session``: this session's state: every key it uses, initialised in one place;
- ``cached``: reads shared between sessions: the engine, the rubric catalog, case views,
  reports;
- ``common``: what several pages share: their opening, choices, rows of links;
- ``auth``: who is using the app: OIDC sign-in, a trusted proxy header, or local mode;
- ``safe``: untrusted text shown without ever being interpreted;
- ``charts``: Altair charts for the dashboards: plain rows in, a chart out;
- ``readings``: what a figure means for the decision, in one plain sentence;
- ``reviewer_figures``: reviewer reliability, agreement over time and the break rate by
  stratum as the pages show them;
- ``workbench``: the judge page's prompt workbench;
- ``rubric_drafting``: the rubrics page's Next version tab (version N+1 written and
  published);
- ``keys``: the review page's keyboard, a small Streamlit component;
- ``page_head``: the early-key script in the head of the page the server sends;
- ``launch``: the serve process: background-job workers, then Streamlit.
"""
