"""Human labels: saving a reviewer's labels, key-ins, the rating table,
adjudication into gold.

Use cases by module:

- ``labeling``: ``record_label``, ``case_labels``
- ``label_table``: (building blocks for the use cases above)
- ``key_events``: ``apply_key_events``
- ``adjudication``: ``disagreement_queue``, ``unit_detail``, ``record_gold``, ``gold_labels``,
  ``ambiguity_notes``
"""
