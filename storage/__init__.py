"""Persistence for Role Review: SQLModel tables, engines, queries and migrations.

All SQL of the application lives here, one module per table family; the services call
these queries inside the transactions they open.

Modules:

- ``models``: the SQLModel tables by name, each family defined on first use;
- ``tables``: the tables' definitions, a module per table family;
- ``engine``: database engines: SQLite by default, PostgreSQL for teams;
- ``migrations``: Alembic migrations, applied by every command on start;
- ``write_queue``: SQLite writers wait their turn behind a lock file;
- ``bulk``: rows in bulk for every family: multi-row inserts, COPY, IN lists in chunks;
- ``backup``: backups of the database: SQLite's online backup API, PostgreSQL's tools;
- ``audit``: the audit log: append-only rows written inside the change's transaction;
- ``reviewers``: the reviewers table;
- ``cases``: contracts, cases, events and deterministic findings;
- ``replacing``: what import --replace does to the labels of a replaced case;
- ``assignments``: who reviews which case, queues, progress, and which cases a reviewer
  may open;
- ``rubric_versions``: stored rubric versions;
- ``carry``: carry-overs into the next rubric version and the re-reviews they queue;
- ``labels``: labels and label events: one reviewer's code for one turn;
- ``gold``: gold labels: the adjudicated reference code of a unit;
- ``units``: what the two append-only unit tables (labels, gold labels) share;
- ``audit_samples``: uniform random draws of turns for unbiased gold;
- ``judge_prompts``: stored judge prompt versions;
- ``judging``: judge runs and their verdicts;
- ``team_judges``: the team's judge choices per rubric version;
- ``certified_verdicts``: certified judge verdicts, stored by judge route --apply;
- ``prompt_align``: the confirmation sets, candidates and replayed answers of judge align;
- ``jobs``: background jobs: enqueue, claim under a lease, heartbeat, stop, finish;
- ``reports``: computed reports: one row per report key, for one data token.
"""
