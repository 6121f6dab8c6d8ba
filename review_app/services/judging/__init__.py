"""The automated judge: prompts and the workbench, runs (local, endpoints, imports), calibration
reports, estimates, selective judging, audits and drift.

Use cases by module:

- ``judge_import``: ``import_verdicts``, ``list_judge_runs``, ``judge_token``
- ``judge_runner``: ``select_case_ids``, ``run_judge``
- ``unit_prompts``: ``unit_messages`` (building blocks of the runs and the prompt preview)
- ``transport``: (the judge's HTTP client: endpoint settings, requests, retries, proxies)
- ``judge_report``: ``calibration_report``, ``fit_run_calibration``, ``calibrated_probability``,
  ``few_shot_material``, ``disagreement_explorer``
- ``judge_compare``: ``compare_judge_runs``
- ``judge_prompts``: ``list_judge_prompts``, ``show_judge_prompt``, ``create_judge_prompt``,
  ``prompt_for_run``, ``preview_messages``
- ``prompt_workbench``: ``preview_prompt``, ``run_on_gold_units``, ``current_job``,
  ``compare_for_workbench``, ``run_on_every_turn``
- ``estimate``: ``break_rate_estimate``
- ``strata``: ``stratified_estimate``, ``fit_strata``
- ``stratified_audit``: ``allocation_plan``, ``draw_stratified_sample``
- ``selective``: ``route_units``, ``route_judges``, ``certified_verdicts``, ``coverage_curve``
- ``drift``: ``drift_report``
- ``local_judge``: (building blocks for the use cases above)
- ``endpoints``: ``list_endpoints``
- ``turn_verdicts``: (building blocks for the use cases above)
"""
