"""The use cases over the database, in packages that are floors: each imports only from
the floors below it (and from the core, ``storage`` and the standard library), never from
one above (tests/test_service_floors.py). Every public function checks the acting
actor's role, or is exempt with a reason (tests/test_authorization.py).

Modules, bottom floor first:

- ``access``: who may act: actors, sign-in, the role checks, which cases a reviewer may open;
- ``operations``: running the house: the database, backups and the audit log;
- ``jobs``: work that runs later: the leased runner, its job kinds registered from above;
- ``rubrics``: rubric versions in the database, drafts, labels carried to a new version;
- ``cases``: conversations: importing case files, the case table, one case turn by turn;
- ``team``: people and roles, the team page, queues and assignments, uniform audit samples;
- ``labels``: a reviewer's labels, key-ins, the rating table, adjudication into gold;
- ``review``: agreement reports, reviewer reliability and agreement over time;
- ``judging``: the automated judge: prompts, runs, calibration, estimates, audits, drift;
- ``exchange``: files in and out across features: uploads, exports, label files, the demo;
- ``reports``: heavy results shown on pages, stored per state of the data: the top floor;
- ``job_kinds``: above every floor, every kind of background job gathered for a worker
  process.
"""
