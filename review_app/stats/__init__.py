"""The statistics core: one estimate type, kappa, Wilson, the bootstraps, the rating table.

Modules:

- ``core``: :class:`~review_app.stats.core.Estimate`, Cohen's kappa, Wilson intervals, unit
  and cluster bootstrap weights;
- ``table``: the rating table of the agreement figures;
- ``codes``: the break mapping of a rubric;
- ``checks``: the checks of options (integers, confidence, seed) and of inputs (0/1 classes,
  probabilities, break mappings, codes) with their messages;
- ``confusion``: the break / no-break collapse of confusion matrices and its metrics;
- ``units``: one order over unit keys of mixed types, and their JSON form;
- ``alt_test``: the alternative annotator test;
- ``ppi``: prediction-powered (PPI++) estimates;
- ``stratified``: stratified prediction-powered inference, and where to place the next audits;
- ``active``: audits drawn by the judge's uncertainty, and the active estimate of the break rate;
- ``selective``: certified selective judging (the judge decides only where provably right enough);
- ``paired``: two judge runs compared on the same gold units, with a verdict;
- ``dawid_skene``: each reviewer's confusion matrix and the units' true codes, from all labels;
- ``drift``: where in the conversation the role breaks (break rates by position and role).

Pure computation: nothing here imports storage or Streamlit. Submodules are imported
where they are used, so loading a rubric does not load numpy.
"""
