"""Human labels: saving a reviewer's labels, key-ins, the rating table, adjudication into
gold.

Modules:

- ``labeling``: per-turn labels against a rubric version, blind between reviewers
  (``record_label``, ``case_labels``);
- ``key_events``: key presses of the review page, applied in order and exactly once
  (``apply_key_events``);
- ``label_table``: current labels as a rating table (``rating_table``);
- ``adjudication``: disagreements, their adjudication by policy owners, and the resulting
  gold labels (``disagreement_queue``, ``unit_detail``, ``record_gold``, ``gold_labels``,
  ``ambiguity_notes``).
"""
