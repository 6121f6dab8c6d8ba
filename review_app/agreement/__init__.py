"""Inter-rater agreement for nominal labels with missing ratings.

Pure computation: nothing here reads a database, a file or a page. The unit of
analysis is whatever the caller says it is (in the app a ``(case_id, turn)``
pair); raters are reviewer names and values are label codes. Any rater may
leave any unit unrated.

Every coefficient comes back as a
:class:`~review_app.agreement.coefficients.Coefficient`. When the data do not define a
coefficient (no unit rated twice, a single category in use, ...) its
``value`` is ``None`` and ``reason`` says why in one sentence; no function here
returns NaN or raises on data that are merely degenerate. Invalid input (a
rater rating the same unit twice, a collapse mapping without an entry for a
code, ...) raises ``ValueError`` with an exact message.

All per-unit work is vectorised with :func:`numpy.bincount` over integer
codes, so a million ratings take milliseconds once the table is built.

Modules (the table itself is :class:`review_app.stats.table.RatingTable`):

- ``coefficients``: the coefficients of one table (alpha, Fleiss, Gwet, pairwise kappa);
- ``bootstrap``: the intervals of alpha and of pairwise kappa;
- ``conversations``: first-break and any-break agreement per conversation;
- ``summary``: every figure of a rubric version's labels as one dict;
- ``over_time``: agreement per week (or batch), and late in a session;
- ``reliability``: which reviewer can be trusted on which codes (Dawid-Skene).

References
----------
Krippendorff, K. (2011). Computing Krippendorff's Alpha-Reliability.
    Annenberg School for Communication, University of Pennsylvania.
Hayes, A. F., & Krippendorff, K. (2007). Answering the call for a standard
    reliability measure for coding data. Communication Methods and Measures,
    1(1), 77-89.
Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters.
    Psychological Bulletin, 76(5), 378-382.
Gwet, K. L. (2008). Computing inter-rater reliability and its variance in the
    presence of high agreement. British Journal of Mathematical and Statistical
    Psychology, 61, 29-48.
Gwet, K. L. (2014). Handbook of Inter-Rater Reliability (4th ed.), chapter 4.
    Advanced Analytics.
Cohen, J. (1960). A coefficient of agreement for nominal scales. Educational
    and Psychological Measurement, 20(1), 37-46.
"""
