"""The Streamlit application. ``app.py`` only routes; each page is widgets plus one
call into a service; shared session state is initialised in :mod:`review_app.ui.state`."""
