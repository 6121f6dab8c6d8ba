"""Versioned review rubrics: loading, validation, identity and differences.

A rubric lives in ``<root>/<id>/v<N>.yaml`` (docs/reference.md, "Rubric files") and is referred
to as ``<id>@<N>``. Once labels refer to a version it is immutable; a change of
content is a new file ``v<N+1>.yaml``.

Identity. :attr:`~review_app.rubrics.model.Rubric.sha256` is the SHA-256 of a canonical
JSON form of the *parsed* content (keys sorted, defaults filled in, text stripped of leading and
trailing whitespace). Comments, indentation, quoting style and blank lines therefore
do not change it; any change to a value, to the order of labels or examples, or to
the text a reviewer reads does.

Examples. Every example belongs to one label; its ``kind`` says on which side of that
label's line the example falls: ``pass`` the good side, ``fail`` the bad side,
``borderline`` on the line. For a fail label, ``fail`` means the label applies and
``pass`` shows a nearby turn it does not apply to; for a pass label, ``pass`` means
the label applies; for borderline and abstain labels the line is whether the turn
can be decided at all, so ``fail`` means that label applies.

Rubric references accept ``role-adherence@1`` and, because the files are named
``v1.yaml``, also ``role-adherence@v1``; both mean version 1. The canonical form
(:attr:`~review_app.rubrics.model.Rubric.ref`) is the one without ``v``.

Modules:

- ``model``: the rubric, its identity and references;
- ``parsing``: reading and validating a rubric file or text;
- ``catalog``: the rubrics directory;
- ``diff``: what changed between two versions;
- ``mapping``: how the labels of version N+1 relate to the codes of version N;
- ``keys``: which key labels with which code, kept from version to version;
- ``editing``: the next version written as YAML text (a draft, one code's fields changed).

This package reads files and nothing else: no storage, no user interface.
"""
