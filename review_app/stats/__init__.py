"""The statistics core: one estimate type, kappa, Wilson, the bootstraps, the rating table.

- :mod:`review_app.stats.core`: :class:`~review_app.stats.core.Estimate`, Cohen's kappa,
  Wilson intervals, unit and cluster bootstrap weights;
- :mod:`review_app.stats.table`: the rating table of the agreement figures;
- :mod:`review_app.stats.codes`: the break mapping of a rubric;
- :mod:`review_app.stats.checks`: the checks of options (integers, confidence, seed) and of
  inputs (0/1 classes, probabilities, break mappings, codes) with their messages;
- :mod:`review_app.stats.confusion`: the break / no-break collapse of confusion matrices and
  its metrics;
- :mod:`review_app.stats.units`: one order over unit keys of mixed types, and their JSON form;
- :mod:`review_app.stats.alt_test`: the alternative annotator test;
- :mod:`review_app.stats.ppi`: prediction-powered (PPI++) estimates.

Pure computation: nothing here imports storage or Streamlit. Submodules are imported
where they are used, so loading a rubric does not load numpy.
"""
