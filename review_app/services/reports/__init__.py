"""Heavy results shown on pages, stored per state of the data and recomputed by jobs: the
top floor, over judging, labels and review.

Use cases by module:

- ``report_store``: (building blocks for the pages' reports)
"""
