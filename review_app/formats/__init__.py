"""Interoperability: cases from other evaluation tools' files, and files for them.

Readers are pure (they read a file, touch no database) and yield validated
:class:`~review_app.case_records.CaseRecord` objects, each with its findings and content
hash, exactly like the native reader; bad input raises
:class:`~review_app.errors.InputError` naming the file, the line of the ORIGINAL file
and the field or column. A reader may raise after yielding records: the caller
imports one file per transaction, so nothing of a bad file is stored.

Cases from tools without contracts have ``"contract": null`` (status
``no_contract``: semantic review only); no finding is invented. What a tool's file
holds beyond the case shape is kept under ``source_metadata`` keys.

Every reader takes the import's :class:`~review_app.formats.options.ImportOptions`
(the same object the command line and the import page build), each format the
options it names in its ``OPTIONS``; the rules of each format are in its module's
documentation and in docs/reference.md, "Foreign formats".

Modules:

- ``detect``: which format a file is in, the registry of formats, reading by format;
- ``options``: what one import is asked for, the typed options every reader takes;
- ``deepeval``: deepeval conversational test cases, read and written;
- ``galtea``: Galtea-style conversation rows, read and written;
- ``openai_chat``: OpenAI chat-completions message lists as JSONL, read and written;
- ``openlayer``: Openlayer session tables, read and written;
- ``fixtures``: labeled regression fixtures for CI (cases, a pytest module, a manifest);
- ``_context``: what one reader call knows (the file, the options, the ids so far);
- ``_contracts``: contracts given as an option or embedded in a record, the tool map;
- ``_ids``: case ids made from the names records carry, unique within a file;
- ``_sessions``: session-rows tables (Galtea, Openlayer) grouped into conversations.
"""
