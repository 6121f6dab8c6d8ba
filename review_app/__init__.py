"""Role Review: human review of chatbot conversations for role adherence.

Modules, from the pure core up to the faces (the services import the core and
``storage``; the faces, the command line and the pages, import the services):

- ``errors``: errors a user can act on (``InputError``, ``NotFound``);
- ``input_policy``: one policy for untrusted input, whatever the format, the path or the
  database;
- ``files``: reading untrusted files: decoding, JSON and JSONL records, CSV rows and tables;
- ``case_records``: reading and validating case files (the native reader);
- ``evaluator``: the deterministic role-contract evaluator (the findings);
- ``formats``: cases from other evaluation tools' files, and files for them;
- ``rubrics``: versioned review rubrics: loading, validation, identity and differences;
- ``stats``: the statistics core: one estimate type, kappa, Wilson, the bootstraps;
- ``agreement``: inter-rater agreement for nominal labels with missing ratings;
- ``calibration``: calibration of an automated judge against human labels;
- ``judging``: judge building blocks: prompt templates, strict answers, verdict files;
- ``services``: the use cases over the database, as floors (README, "Layout");
- ``cli``: the ``review-app`` command line: thin commands over the services;
- ``inspect_command``: the light ``review-app inspect`` (findings for case files, no
  database);
- ``ui``: the Streamlit application;
- ``version``: the version of Role Review (``VERSION``).

``python -m review_app`` (``__main__``) is the command line's entry point.
"""
