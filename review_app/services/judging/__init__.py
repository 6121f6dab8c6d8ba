"""The automated judge: prompts and the workbench, runs (local, endpoints, imports), calibration
reports, estimates, selective judging, audits and drift.

Modules:

- ``judge_prompts``: judge prompt versions, stored like rubric versions
  (``list_judge_prompts``, ``show_judge_prompt``, ``create_judge_prompt``,
  ``preview_messages``);
- ``prompt_workbench``: the judge page's workbench: a prompt previewed on one gold unit, run
  on gold or on every turn (``preview_prompt``, ``run_on_gold_units``,
  ``run_on_every_turn``, ``compare_for_workbench``);
- ``judge_jobs``: a judge run as one piece of work, in the foreground or as a stored job
  (``run_judge_job``);
- ``judge_run_kind``: judge runs as background jobs: queued, and run by a worker
  (``start_judge_job``);
- ``align``: a better prompt suggested by an optimiser and confirmed on gold it never saw;
- ``judge_runner``: a judge run's orchestration: units asked, verdicts stored as they
  arrive, resumable (``run_judge``, ``select_case_ids``);
- ``transport``: the judge's HTTP client: endpoint settings, requests, retries and
  backoff, proxies, TLS;
- ``unit_prompts``: a unit's prompt: cases read in batches, rendered up to each judged turn
  (``unit_messages``);
- ``endpoints``: the judge endpoints an admin configured (``list_endpoints``);
- ``local_judge``: the offline judge: llama.cpp's server with the bundled model;
- ``local_judge_lease``: llama.cpp's server for as long as the process that started it
  lives;
- ``runs``: the judge-run registry: a run's name and identity, listing runs
  (``list_judge_runs``, ``judge_token``);
- ``run_defaults``: which run a page or a command uses when nobody chose one
  (``default_run``, ``default_pair``);
- ``judge_import``: verdict files imported as a run (``import_verdicts``);
- ``turn_verdicts``: a run's verdicts as arrays, the reports' hot path (``TurnVerdicts``);
- ``judge_report``: the calibration report against humans, calibration maps, few-shot
  material (``calibration_report``, ``fit_run_calibration``, ``few_shot_material``,
  ``disagreement_explorer``);
- ``unit_with_judge``: one unit for the adjudicate page, with the judge's verdict on it
  (``unit_detail_with_judge``);
- ``judge_compare``: two runs compared on the same gold units (``compare_judge_runs``);
- ``estimate``: how often the chatbot breaks role, from the judge and gold
  (``break_rate_estimate``);
- ``strata``: where the judge fails: the break rate by stratum (``stratified_estimate``,
  ``fit_strata``);
- ``stratified_audit``: audits drawn by stratum, sized by Neyman allocation
  (``allocation_plan``, ``draw_stratified_sample``);
- ``uncertainty_audit``: audits drawn by the judge's uncertainty
  (``draw_uncertainty_sample``, ``uncertainty_sample``);
- ``selective``: certified selective judging over one run or a cascade (``route_units``,
  ``route_judges``, ``certified_verdicts``, ``coverage_curve``);
- ``drift``: where in the conversation the role breaks (``drift_report``).
"""
