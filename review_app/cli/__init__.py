"""The ``review-app`` command line: thin commands over the services.

Each command opens the database (migrating it on first use) and calls one service
function. Bad input gives one sentence on stderr naming the file, line or field,
and exit code 2; never a traceback. A call builds only the command it runs: its
module, and what every command shares.

Modules:

- ``application``: the application assembled, each command or group from its module
  only when called (``build_app``, ``main``);
- ``shared``: what every command uses: exit codes of bad input, shared options, the
  database and the operator (``ErrorsAsMessages``);
- ``output``: what commands print: JSON, tables, untrusted text made safe for a terminal;
- ``progress``: progress bars on a terminal only;
- ``case_files``: inspect case files (no database) and import them;
- ``cases``: list and show imported cases;
- ``labels``: human labels in and out in bulk;
- ``reviewers``: who reviews in which role, and their queues (assign);
- ``rubrics``: the rubric versions: list, show with its keys, compare two, publish the next;
- ``agreement``: inter-rater agreement of a rubric version's labels, and drift;
- ``judge``: judges' verdicts in, judge runs, and how far to trust them;
- ``jobs``: background jobs: list them, stop one, run a worker;
- ``export``: labeled regression fixtures and data exports;
- ``admin``: looking after the database: the audit log, backup and restore;
- ``server``: serving the review application (serve), and the demo;
- ``render``: a case view as plain text and JSON;
- ``render_judging``: judging reports as text for the terminal;
- ``render_reviewers``: reviewer reliability and agreement over time as text;
- ``render_strata``: the break rate by stratum and a draw by stratum as text.

``python -m review_app.cli`` (``__main__``) runs the application without the light
``inspect`` path of ``review_app.__main__``.
"""
