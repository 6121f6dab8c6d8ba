"""The review page's keyboard: a small Streamlit component (plain HTML/JS, no build).

Modules:

- ``panel``: the component declared, the panel drawn beside the transcript (``keyboard``),
  and the early-key script drawn first by the entry script (``early_keys``).

Beside it, ``frontend/index.html`` (the component's page, served by Streamlit) and
``early.html`` (the script that catches keys before the panel is up).
"""
