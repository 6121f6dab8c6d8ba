"""The deterministic role-contract evaluator (docs/reference.md, "Findings").

A pure function of one case: no I/O, no model, no guessing from prose. It walks the
transcript once, in list order, keeping the active role. Only a ``system`` event's
``set_role`` changes the role, and the change applies to the events after it. Every
``observed_actions`` entry of an assistant event is checked against the allowed set
of the role active at that event.

Public API, for other tools and CI pipelines::

    from review_app.evaluator import evaluate_case, diagnostic

    result = evaluate_case(case_dict)   # plain dict in, plain dict out
    print(diagnostic(result))           # one stable line, no transcript text

:func:`evaluate_case` never raises on JSON-shaped input (dicts, lists, strings,
numbers, booleans, ``None``): a case that is not shaped as in docs/reference.md, "Cases", gets the
``malformed_case`` fixture error naming the field.

Result fields: ``case_id``, ``contract_version``, ``status`` (``pass`` | ``fail`` |
``invalid`` | ``no_contract``), ``fixture_errors``, ``violations``,
``first_violation``, ``role_by_turn`` (turn -> active role, integer keys),
``harness_findings`` (the missing-context evidence lane) and ``evaluator_version``.
A case with fixture errors reports no violations.
"""

from __future__ import annotations

import copy
from typing import Any, Literal, cast, get_args

EVALUATOR_VERSION = "1"
_TURN_SENTINEL = -(1 << 62)

ACTORS = frozenset({"user", "assistant", "system", "tool"})

FixtureErrorCode = Literal[
    "malformed_case",
    "unknown_initial_role",
    "invalid_event_order",
    "untrusted_role_transition",
    "unknown_transition_role",
    "actions_on_non_assistant_event",
    "unknown_action",
]
"""The fixture error codes (docs/reference.md, "Findings"): mypy holds every
:func:`_fixture_error` to one of them."""
FIXTURE_ERROR_CODES: tuple[str, ...] = get_args(FixtureErrorCode)


def _fixture_error(
    code: FixtureErrorCode, field: str, message: str, turn: Any = None, **details: Any
) -> dict[str, Any]:
    """A fixture error record: code, turn (an integer or None), field, details, message."""
    return {
        "code": code,
        "turn": turn if type(turn) is int else None,
        "field": field,
        **details,
        "message": message,
    }


def _malformed(field: str, message: str, turn: Any = None) -> dict[str, Any]:
    return _fixture_error("malformed_case", field, message, turn)


# bool before int: a boolean is an int to isinstance.
_JSON_TYPE_NAMES = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "an object"),
)


def type_name(value: Any) -> str:
    """How an error message names the JSON type of ``value``."""
    if value is None:
        return "null"
    for kind, name in _JSON_TYPE_NAMES:
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _string_list_problem(value: Any) -> str | None:
    if type(value) is not list:
        return f"expected a list of strings, got {type_name(value)}"
    if not set(map(type, value)) <= _STR_TYPE:
        for position, item in enumerate(value):
            if type(item) is not str:
                return f"item {position} is {type_name(item)}, expected a string"
    return None


_STR_TYPE = {str}


class _Contract:
    """The parts of a contract the evaluator needs, precomputed once per case."""

    __slots__ = (
        "_sorted_allowed",
        "allowed",
        "initial_role",
        "instruction_sha256",
        "version",
        "vocabulary",
    )

    def __init__(self) -> None:
        self.version: str | None = None
        self.initial_role: str | None = None
        self.vocabulary: frozenset[str] = frozenset()
        self.allowed: dict[str, frozenset[str]] = {}
        self.instruction_sha256: str | None = None
        self._sorted_allowed: dict[str, tuple[str, ...]] = {}

    def sorted_allowed(self, role: str | None) -> list[str]:
        """A new list of the role's allowed actions, sorted (for a violation record)."""
        key = role or ""
        cached = self._sorted_allowed.get(key)
        if cached is None:
            cached = self._sorted_allowed[key] = tuple(sorted(self.allowed.get(key, ())))
        return list(cached)


_CONTRACT_CACHE: dict[str, tuple[dict[str, Any], _Contract]] = {}
_CONTRACT_CACHE_SIZE = 256


def _read_contract_cached(contract: Any, errors: list[dict[str, Any]]) -> _Contract | None:
    """:func:`_read_contract`, remembered per contract version.

    A corpus repeats a handful of contracts across thousands of cases; comparing a
    contract with the remembered copy costs a fraction of validating it again. The
    copy is private, so a caller mutating its dict afterwards changes nothing here.

    Only contracts without errors are remembered: Python's ``==`` holds between
    ``1``, ``1.0`` and ``True``, so a remembered error message ("item 0 is an
    integer") could otherwise describe another case's contract.
    """
    if type(contract) is not dict:
        return _read_contract(contract, errors)
    version = contract.get("version")
    if type(version) is str:
        cached = _CONTRACT_CACHE.get(version)
        if cached is not None and cached[0] == contract:
            return cached[1]
    own_errors: list[dict[str, Any]] = []
    parsed = _read_contract(contract, own_errors)
    errors.extend(own_errors)
    if type(version) is str and parsed is not None and not own_errors:
        if len(_CONTRACT_CACHE) >= _CONTRACT_CACHE_SIZE:
            _CONTRACT_CACHE.clear()
        _CONTRACT_CACHE[version] = (copy.deepcopy(contract), parsed)
    return parsed


def _read_contract(contract: Any, errors: list[dict[str, Any]]) -> _Contract | None:
    """Validate the contract's shape; ``None`` when it cannot be used at all."""
    if type(contract) is not dict:
        errors.append(_malformed("contract", f"expected an object, got {type_name(contract)}"))
        return None
    parsed = _Contract()
    usable = True

    version = contract.get("version")
    if type(version) is str and version:
        parsed.version = version
    else:
        errors.append(_malformed("contract.version", "expected a non-empty string"))

    initial_role = contract.get("initial_role")
    if type(initial_role) is str:
        parsed.initial_role = initial_role
    else:
        errors.append(_malformed("contract.initial_role", "expected a string"))
        usable = False

    vocabulary = contract.get("action_vocabulary")
    problem = _string_list_problem(vocabulary)
    if problem:
        errors.append(_malformed("contract.action_vocabulary", problem))
        usable = False
    else:
        parsed.vocabulary = frozenset(cast(list[str], vocabulary))

    roles = contract.get("roles")
    if type(roles) is not dict or not roles:
        errors.append(_malformed("contract.roles", "expected a non-empty object of roles"))
        usable = False
    else:
        for role, spec in roles.items():
            if type(spec) is not dict:
                errors.append(
                    _malformed(
                        f"contract.roles.{role}", f"expected an object, got {type_name(spec)}"
                    )
                )
                usable = False
                continue
            allowed = spec.get("allowed_actions")
            problem = _string_list_problem(allowed)
            if problem:
                errors.append(_malformed(f"contract.roles.{role}.allowed_actions", problem))
                usable = False
                continue
            parsed.allowed[role] = frozenset(cast(list[str], allowed))

    digest = contract.get("role_instruction_sha256")
    if digest is not None:
        if type(digest) is str:
            parsed.instruction_sha256 = digest
        else:
            errors.append(_malformed("contract.role_instruction_sha256", "expected a string"))

    if not usable:
        return None

    for role, allowed_actions in parsed.allowed.items():
        for action in sorted(allowed_actions - parsed.vocabulary):
            errors.append(
                _fixture_error(
                    "unknown_action",
                    f"contract.roles.{role}.allowed_actions",
                    f"role {role} allows {action}, which is not in the vocabulary",
                    action=action,
                    active_role=role,
                )
            )
    if parsed.initial_role not in parsed.allowed:
        errors.append(
            _fixture_error(
                "unknown_initial_role",
                "contract.initial_role",
                f"initial role {parsed.initial_role} is not one of the contract's roles",
                role=parsed.initial_role,
            )
        )
    return parsed


def _optional_string(
    request: dict[str, Any], key: str, field: str, turn: Any, errors: list[dict[str, Any]]
) -> str | None:
    """``request[key]`` when it is a string; ``None`` when absent, or (with an error) not
    a string."""
    value = request.get(key)
    if value is None or type(value) is str:
        return value
    errors.append(_malformed(f"{field}.{key}", "expected a string", turn))
    return None


def _check_request(
    request: Any,
    index: int,
    turn: Any,
    contract: _Contract | None,
    context_turns: list[int],
    errors: list[dict[str, Any]],
    findings: list[dict[str, Any]],
) -> None:
    field = f"transcript[{index}].request"
    if type(request) is not dict:
        errors.append(_malformed(field, f"expected an object, got {type_name(request)}", turn))
        return
    request_id = _optional_string(request, "request_id", field, turn, errors)
    version = _optional_string(request, "contract_version", field, turn, errors)
    included = request.get("included_turns")
    if included is not None and (
        type(included) is not list or any(type(item) is not int for item in included)
    ):
        errors.append(_malformed(f"{field}.included_turns", "expected a list of integers", turn))
        included = None
    digest = _optional_string(request, "role_instruction_sha256", field, turn, errors)
    if contract is None:
        return

    where = {"turn": turn if type(turn) is int else None, "request_id": request_id}
    if version is not None and contract.version is not None and version != contract.version:
        findings.append(
            {
                "code": "request_contract_mismatch",
                **where,
                "expected": contract.version,
                "actual": version,
            }
        )
    if included is not None:
        sent = set(included)
        missing = [earlier for earlier in context_turns if earlier not in sent]
        if missing:
            findings.append({"code": "request_missing_turns", **where, "missing_turns": missing})
    if (
        digest is not None
        and contract.instruction_sha256 is not None
        and digest != contract.instruction_sha256
    ):
        findings.append(
            {
                "code": "role_instruction_mismatch",
                **where,
                "expected": contract.instruction_sha256,
                "actual": digest,
            }
        )


def compiled() -> bool:
    """Whether this module is the compiled build (README, "The compiled evaluator")."""
    return not __file__.endswith(".py")


def evaluate_case(case: Any) -> dict[str, Any]:
    """Deterministic role-contract findings for one case (docs/reference.md, "Findings").

    ``case`` is a plain dict as read from JSON. The function never mutates it and
    never raises for JSON-shaped input.
    """
    # The common case, checked with the least work: a case whose fields have their
    # types, whose contract equals one remembered without errors, and whose transcript
    # the fast pass finishes. Its result is what _evaluate would build (no fixture
    # errors, so "fail" or "pass"); anything else goes to _evaluate.
    if type(case) is dict:
        # Subscripts cost less than get(); a case missing a required key goes to
        # _evaluate, which names it.
        try:
            case_id = case["case_id"]
            raw_contract = case["contract"]
            transcript = case["transcript"]
        except KeyError:
            return _evaluate(case, try_fast_pass=True)
        chatbot_role = case.get("chatbot_role")
        if (
            type(case_id) is str
            and case_id
            and (chatbot_role is None or type(chatbot_role) is str)
            and type(raw_contract) is dict
            and type(transcript) is list
        ):
            version = raw_contract.get("version")
            cached = _CONTRACT_CACHE.get(version) if type(version) is str else None
            if cached is not None and cached[0] == raw_contract:
                contract = cached[1]
                found = _fast_pass(transcript, contract)
                if found is None:
                    return _evaluate(case, try_fast_pass=False)
                violations = found[0]
                return {
                    "case_id": case_id,
                    "contract_version": contract.version,
                    "status": "fail" if violations else "pass",
                    "fixture_errors": [],
                    "violations": violations,
                    "first_violation": violations[0] if violations else None,
                    "role_by_turn": found[1],
                    "harness_findings": found[2],
                    "evaluator_version": EVALUATOR_VERSION,
                }
    return _evaluate(case, try_fast_pass=True)


def _evaluate(case: Any, *, try_fast_pass: bool) -> dict[str, Any]:
    """:func:`evaluate_case` for any input, explaining every problem.

    ``try_fast_pass`` is false when :func:`evaluate_case` has run the fast pass on this
    case already and it gave up.
    """
    errors: list[dict[str, Any]] = []
    violations: list[dict[str, Any]] = []
    harness: list[dict[str, Any]] = []
    role_by_turn: dict[int, str | None] = {}

    if type(case) is not dict:
        errors.append(_malformed("(case)", f"expected an object, got {type_name(case)}"))
        return _result(None, None, errors, violations, harness, role_by_turn, has_contract=True)

    case_id = case.get("case_id")
    if type(case_id) is not str or not case_id:
        errors.append(_malformed("case_id", "expected a non-empty string"))
        case_id = None
    chatbot_role = case.get("chatbot_role")
    if chatbot_role is not None and type(chatbot_role) is not str:
        errors.append(_malformed("chatbot_role", "expected a string"))

    raw_contract = case.get("contract")
    has_contract = raw_contract is not None
    contract = _read_contract_cached(raw_contract, errors) if has_contract else None
    contract_version = contract.version if contract is not None else None
    if contract_version is None and type(raw_contract) is dict:
        version = raw_contract.get("version")
        contract_version = version if type(version) is str else None

    transcript = case.get("transcript")
    if type(transcript) is not list:
        errors.append(_malformed("transcript", f"expected a list, got {type_name(transcript)}"))
    else:
        found = (
            _fast_pass(transcript, contract)
            if try_fast_pass and contract is not None and not errors
            else None
        )
        if found is None:
            _careful_pass(transcript, contract, errors, violations, harness, role_by_turn)
        else:
            violations, role_by_turn, harness = found
    return _result(
        case_id,
        contract_version,
        errors,
        violations,
        harness,
        role_by_turn,
        has_contract=has_contract,
    )


_EVENT_KEYS = ("turn", "actor", "text", "observed_actions")
"""The keys of an assistant event with actions, in the order cases usually write them."""


def _fast_pass(
    transcript: list[dict[str, Any]], contract: _Contract
) -> tuple[list[dict[str, Any]], dict[int, str | None], list[dict[str, Any]]] | None:
    """The single pass for a well-formed case; ``None`` at the first anomaly.

    Almost every recorded case is well formed, so this loop does only what the
    findings need. Anything unexpected (a wrong type, a missing key, a fixture
    error) abandons it; :func:`_careful_pass` then walks the case once more and
    explains every problem. Both apply the same rules; a property test checks that
    they agree wherever this one finishes.

    The loop is the evaluator's hot path (benchmarks/bench_foundation.py), so it counts
    operations: one dictionary lookup per key it needs, and the two common shapes (a
    user event with text; an assistant event with text and a list of actions) settled
    before the general checks.

    Its types are written for the compiled build (mypyc; README, "The compiled
    evaluator"), which checks them at run time: ``transcript`` holds dicts (an event
    that is not one raises ``TypeError`` there, as a subscript of it does in Python,
    and the pass gives up) and ``previous_turn`` is an ``int``, compared natively. The
    builtins are named directly (``type(turn) is not int``), which mypyc reads as a
    type check and compiles to one.
    """
    allowed_by_role = contract.allowed
    vocabulary = contract.vocabulary
    active_role = contract.initial_role
    allowed = allowed_by_role[active_role]  # type: ignore[index]
    actors = ACTORS
    violations: list[dict[str, Any]] = []
    harness: list[dict[str, Any]] = []
    role_by_turn: dict[int, str | None] = {}
    # Turns below this sentinel are legal but so unusual that the careful pass takes them.
    previous_turn: int = _TURN_SENTINEL
    context: _ContextTurns | None = None
    try:
        # A JSON parser gives every object of one document the same key strings (the
        # standard library's per document, orjson's from a cache), so looking keys up
        # with the case's own strings matches by identity instead of comparing text.
        # They are read from the second event (the first assistant turn, as a rule)
        # when it has exactly these keys; otherwise the literals serve, as correctly.
        # (Inside the try: in the compiled build, an event that is not a dict raises.)
        k_turn, k_actor, k_text, k_actions = _EVENT_KEYS
        if len(transcript) > 1:
            second = transcript[1]
            if type(second) is dict and len(second) == 4:
                # Unpacked and compared one by one: cheaper than a tuple of the keys.
                first_key, second_key, third_key, fourth_key = second
                if (
                    first_key == "turn"
                    and second_key == "actor"
                    and third_key == "text"
                    and fourth_key == "observed_actions"
                ):
                    k_turn, k_actor, k_text, k_actions = (
                        first_key,
                        second_key,
                        third_key,
                        fourth_key,
                    )
        for event in transcript:
            turn = event[k_turn]
            if type(turn) is not int or turn <= previous_turn:
                return None
            previous_turn = turn
            role_by_turn[turn] = active_role
            actor = event[k_actor]
            # The two common shapes. Once "turn" and "actor" were found, a three-key
            # user event holding "text" has no other key, and a four-key assistant
            # event holding "text" and "observed_actions" neither: no transition, no
            # request to check. (== on the actor: comparing two short strings costs
            # less than hashing a fresh one for a set lookup.)
            if actor == "user":
                if len(event) == 3 and k_text in event:
                    continue
            elif actor == "assistant" and len(event) == 4 and k_text in event:
                try:
                    actions = event[k_actions]
                except KeyError:
                    actions = None
                if type(actions) is list:
                    for action in actions:
                        if action not in allowed:
                            if type(action) is not str or action not in vocabulary:
                                return None
                            violations.append(_violation(turn, action, active_role, contract))
                    continue
            if actor not in actors:
                return None

            new_role = event.get("set_role")
            if new_role is not None:
                if actor != "system" or type(new_role) is not str:
                    return None
                allowed = allowed_by_role.get(new_role)  # type: ignore[assignment]
                if allowed is None:
                    return None
                active_role = new_role
                role_by_turn[turn] = new_role
            actions = event.get("observed_actions")
            if actions:
                if actor != "assistant" or type(actions) is not list:
                    return None
                for action in actions:
                    if action in allowed:
                        continue
                    if type(action) is not str or action not in vocabulary:
                        return None
                    violations.append(_violation(turn, action, active_role, contract))
            elif actions is not None and type(actions) is not list:
                return None
            request = event.get("request")
            if request is not None:
                if actor != "assistant":
                    return None
                if context is None:
                    context = _ContextTurns(transcript)
                index, earlier = context.before_event(event)
                errors: list[dict[str, Any]] = []
                _check_request(request, index, turn, contract, earlier, errors, harness)
                if errors:
                    return None
    except (TypeError, KeyError, AttributeError):
        return None
    return violations, role_by_turn, harness


class _ContextTurns:
    """Turns before a position that a model-facing request should carry, built lazily.

    Every user, assistant and tool event counts; a system event counts only when it
    has text (a bare ``set_role`` is control-plane state, not conversation). The
    list grows as requests further down the transcript ask for it, so a case with a
    request on every assistant turn still costs one walk.
    """

    __slots__ = ("scanned", "transcript", "turns")

    def __init__(self, transcript: list[Any]) -> None:
        self.transcript = transcript
        self.scanned = 0
        self.turns: list[int] = []

    def before_event(self, event: dict[str, Any]) -> tuple[int, list[int]]:
        """Where ``event`` stands (found by identity, scanning on) and the turns before it."""
        position = self.scanned
        while self.transcript[position] is not event:
            position += 1
        return position, self.before(position)

    def before(self, end: int) -> list[int]:
        for event in self.transcript[self.scanned : end]:
            if type(event) is not dict:
                continue
            turn = event.get("turn")
            if type(turn) is int and (
                event.get("actor") != "system" or event.get("text") is not None
            ):
                self.turns.append(turn)
        self.scanned = max(self.scanned, end)
        return self.turns


def _careful_pass(
    transcript: list[Any],
    contract: _Contract | None,
    errors: list[dict[str, Any]],
    violations: list[dict[str, Any]],
    harness: list[dict[str, Any]],
    role_by_turn: dict[int, str | None],
) -> None:
    """The same rules as :func:`_fast_pass`, checking every type and explaining every problem."""
    if contract is not None:
        active_role: str | None = contract.initial_role
        allowed_by_role = contract.allowed
        vocabulary = contract.vocabulary
        allowed = allowed_by_role.get(active_role or "", frozenset())
    else:
        active_role = None
        allowed_by_role = {}
        vocabulary = frozenset()
        allowed = frozenset()
    evaluate_actions = contract is not None
    previous_turn: int | None = None
    actors = ACTORS
    context = _ContextTurns(transcript)

    for index, event in enumerate(transcript):
        if type(event) is not dict:
            errors.append(
                _malformed(f"transcript[{index}]", f"expected an object, got {type_name(event)}")
            )
            continue
        turn = event.get("turn")
        if type(turn) is int:
            if previous_turn is not None and turn <= previous_turn:
                errors.append(
                    _fixture_error(
                        "invalid_event_order",
                        f"transcript[{index}].turn",
                        f"turn {turn} repeats the previous turn"
                        if turn == previous_turn
                        else f"turn {turn} comes after turn {previous_turn}",
                        turn,
                        previous_turn=previous_turn,
                    )
                )
            previous_turn = turn
        else:
            errors.append(
                _fixture_error(
                    "invalid_event_order",
                    f"transcript[{index}].turn",
                    "missing turn"
                    if turn is None
                    else f"expected an integer turn, got {type_name(turn)}",
                    previous_turn=previous_turn,
                )
            )

        actor = event.get("actor")
        if type(actor) is not str or actor not in actors:
            errors.append(
                _malformed(
                    f"transcript[{index}].actor",
                    "expected one of assistant, system, tool, user",
                    turn,
                )
            )
            actor = None

        new_role = event.get("set_role")
        if new_role is not None:
            if type(new_role) is not str:
                errors.append(
                    _malformed(f"transcript[{index}].set_role", "expected a string", turn)
                )
            elif actor != "system":
                errors.append(
                    _fixture_error(
                        "untrusted_role_transition",
                        f"transcript[{index}].set_role",
                        f"a {actor or 'non-system'} event cannot change the role",
                        turn,
                        actor=actor,
                        requested_role=new_role,
                    )
                )
            elif evaluate_actions:
                if new_role in allowed_by_role:
                    active_role = new_role
                    allowed = allowed_by_role[new_role]
                else:
                    errors.append(
                        _fixture_error(
                            "unknown_transition_role",
                            f"transcript[{index}].set_role",
                            f"role {new_role} is not one of the contract's roles",
                            turn,
                            requested_role=new_role,
                        )
                    )

        if type(turn) is int and evaluate_actions:
            role_by_turn[turn] = active_role

        actions = event.get("observed_actions")
        if actions is not None:
            if type(actions) is not list:
                errors.append(
                    _malformed(
                        f"transcript[{index}].observed_actions",
                        f"expected a list of strings, got {type_name(actions)}",
                        turn,
                    )
                )
            elif actions:
                if actor != "assistant":
                    errors.append(
                        _fixture_error(
                            "actions_on_non_assistant_event",
                            f"transcript[{index}].observed_actions",
                            "only assistant events carry observed actions",
                            turn,
                            actor=actor,
                            actions=[a for a in actions if type(a) is str],
                        )
                    )
                else:
                    for action in actions:
                        if type(action) is not str:
                            errors.append(
                                _malformed(
                                    f"transcript[{index}].observed_actions",
                                    "expected a list of strings",
                                    turn,
                                )
                            )
                        elif action in allowed or not evaluate_actions:
                            continue
                        elif action not in vocabulary:
                            errors.append(
                                _fixture_error(
                                    "unknown_action",
                                    f"transcript[{index}].observed_actions",
                                    f"action {action} is not in the vocabulary",
                                    turn,
                                    action=action,
                                    active_role=active_role,
                                )
                            )
                        else:
                            violations.append(
                                _violation(
                                    turn if type(turn) is int else None,
                                    action,
                                    active_role,
                                    contract,  # type: ignore[arg-type]
                                )
                            )

        request = event.get("request")
        if request is not None:
            if actor != "assistant":
                errors.append(
                    _malformed(
                        f"transcript[{index}].request",
                        "only assistant events carry a request record",
                        turn,
                    )
                )
            else:
                _check_request(
                    request, index, turn, contract, context.before(index), errors, harness
                )


def _violation(
    turn: int | None, action: str, active_role: str | None, contract: _Contract
) -> dict[str, Any]:
    return {
        "code": "action_outside_role",
        "turn": turn,
        "action": action,
        "active_role": active_role,
        "allowed_actions": contract.sorted_allowed(active_role),
    }


def _result(
    case_id: str | None,
    contract_version: str | None,
    errors: list[dict[str, Any]],
    violations: list[dict[str, Any]],
    harness: list[dict[str, Any]],
    role_by_turn: dict[int, str | None],
    *,
    has_contract: bool,
) -> dict[str, Any]:
    if errors:
        status = "invalid"
        violations = []
    elif not has_contract:
        status = "no_contract"
    elif violations:
        status = "fail"
    else:
        status = "pass"
    return {
        "case_id": case_id,
        "contract_version": contract_version,
        "status": status,
        "fixture_errors": errors,
        "violations": violations,
        "first_violation": violations[0] if violations else None,
        "role_by_turn": role_by_turn,
        "harness_findings": harness,
        "evaluator_version": EVALUATOR_VERSION,
    }


def lane(result: dict[str, Any]) -> str:
    """The review lane of a result: where a case goes first.

    ``invalid`` (fix the fixture or the contract) comes before ``missing-context``
    (the harness did not send what the product meant to send: look there before
    blaming the model), which comes before ``violation``; then ``no-contract``
    (semantic review only) and ``pass``.
    """
    status = result["status"]
    if status == "invalid":
        return "invalid"
    if result["harness_findings"]:
        return "missing-context"
    if status == "fail":
        return "violation"
    if status == "no_contract":
        return "no-contract"
    return "pass"


def log_token(value: Any) -> str:
    """A value for one ``key=value`` of the diagnostic line.

    Ids, versions, roles and actions come from the case file; a space, a line break or
    an escape sequence in one would split the line or reach the CI log raw, so those
    characters are written as ``\\xNN`` / ``\\uNNNN`` escapes. Ordinary names pass
    unchanged.
    """
    text = str(value)
    if text.isprintable() and " " not in text:
        return text
    return "".join(ch if ch.isprintable() and ch != " " else escaped_char(ord(ch)) for ch in text)


def escaped_char(code: int) -> str:
    """``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN`` for the code point ``code``."""
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def diagnostic(result: dict[str, Any]) -> str:
    """The one-line CI log summary (docs/reference.md, "Findings"); never transcript text."""
    case_id = log_token(result.get("case_id") or "-")
    contract = log_token(result.get("contract_version") or "-")
    status = result.get("status")
    if status == "invalid":
        first = result["fixture_errors"][0]
        return f"role-eval invalid case={case_id} contract={contract} error={first['code']}"
    if status == "no_contract":
        return f"role-eval no-contract case={case_id}"
    violation = result.get("first_violation")
    if violation is None:
        return f"role-eval pass case={case_id} contract={contract}"
    allowed = ",".join(violation["allowed_actions"])
    return (
        f"role-eval fail case={case_id} contract={contract} "
        f"first_violation_turn={violation['turn']} "
        f"active_role={log_token(violation['active_role'])} "
        f"action={log_token(violation['action'])} allowed={log_token(allowed)}"
    )
