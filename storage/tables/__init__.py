"""The tables, one module per table family (named as the storage module that queries it),
each defined when first imported: a command pays for the tables it uses, not for all of
them (issue 38: defining every SQLModel table cost a light command about a fifth of its
start-up). :mod:`storage.models` names every table; ``storage.models.define_all``
defines them all (the migrations, the schema's tests). A family's module imports the
families whose tables its foreign keys name, so that they are defined before it.

Modules:

- ``base``: what every family shares: the timestamp default, partial unique indexes per
  dialect, deferred validator builds;
- ``assignments``: assignments: who reviews which case;
- ``audit``: the audit log;
- ``audit_samples``: audit samples and the units they drew;
- ``carry``: carry-overs into the next rubric version and re-reviews;
- ``cases``: contracts, cases, events, evaluations and findings;
- ``certified_verdicts``: certified judge verdicts;
- ``gold``: gold labels;
- ``jobs``: background jobs;
- ``judge_prompts``: judge prompt versions;
- ``judging``: judge runs and their verdicts;
- ``labels``: labels and label events;
- ``prompt_align``: judge align's confirmation sets, tests, candidates and proposals;
- ``reports``: computed reports;
- ``reviewers``: reviewers;
- ``rubric_versions``: rubric versions;
- ``team_judges``: the team's judge per rubric version.
"""
