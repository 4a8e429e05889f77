"""Arguments the SDK refuses before a tool runs, told as one sentence per field.

The SDK validates a call's arguments against the tool's input schema and, when they do not
fit, answers with pydantic's report: several lines per field, the model class's name and a
link to pydantic's documentation. The model reads that text; every other refusal it gets
from nooa-mcp is `field: problem. Fix.`, so these are too.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from ..domain.text import head

__all__ = ["argument_sentence"]

#: pydantic error types, as what the argument must be (the context fills the braces).
_MUST = {
    "less_than_equal": "must be at most {le}",
    "less_than": "must be below {lt}",
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be above {gt}",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be text",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "literal_error": "must be one of {expected}",
    "enum": "must be one of {expected}",
    "string_too_long": "must be at most {max_length} characters",
    "string_too_short": "must be at least {min_length} characters",
    "too_long": "must hold at most {max_length} items",
    "too_short": "must hold at least {min_length} items",
    "datetime_parsing": "must be an ISO 8601 time such as 2026-12-01T09:00:00Z",
    "datetime_from_date_parsing": "must be an ISO 8601 time such as 2026-12-01T09:00:00Z",
    "datetime_type": "must be an ISO 8601 time such as 2026-12-01T09:00:00Z",
    "finite_number": "must be a finite number",
}


#: The names pydantic gives the branches of a union in an error's location ("salience.str").
_BRANCHES = frozenset({"str", "float", "int", "bool", "none", "list", "dict", "datetime", "date"})


def _field(loc: tuple[Any, ...]) -> str:
    parts = [
        str(p)
        for p in loc
        if isinstance(p, int) or (p not in _BRANCHES and "[" not in p and "-" not in p)
    ]
    return ".".join(parts) or "arguments"


def _problem(error: Any) -> str:
    template = _MUST.get(error["type"])
    if template is None:
        problem = str(error.get("msg", "is not valid")).removeprefix("Input ")
        return problem[:1].lower() + problem[1:]
    try:
        return template.format(**(error.get("ctx") or {}))
    except (KeyError, IndexError):
        return template.split(" {", 1)[0]


def _as_json(value: Any) -> str:
    """A value as the caller wrote it (null, true, "text"), not as Python shows it."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # a circular container, or an integer past str()'s limit
        return "a value that cannot be shown"


def argument_sentence(exc: ValidationError) -> str:
    """`field: problem; got value. Fix.` for the first field at fault (and how many more).

    The branches of a union (a salience given as a label or a number) fail one error each;
    they are told as one: `salience: must be text or a number`.
    """
    by_field: dict[str, list[Any]] = {}
    for error in exc.errors():
        by_field.setdefault(_field(error["loc"]), []).append(error)
    if not by_field:
        return "arguments: are not valid. Check them against the tool's input schema."
    field, errors = next(iter(by_field.items()))
    kinds = {e["type"] for e in errors}
    if "missing" in kinds:
        first = f"{field}: is required. Pass it."
    elif kinds & {"extra_forbidden", "unexpected_keyword_argument"}:
        first = f"{field}: is not an argument of this tool. Leave it out."
    elif kinds == {"unknown_key"}:
        # An object with a key it does not know: the sentence names the key and the keys
        # there are; the whole object after it ("got {...}") would only repeat it, cut short.
        first = f"{field}: {_problem(errors[0])}. Spell the key as listed, or leave it out."
    else:
        problems: list[str] = []
        for e in errors:
            problem = _problem(e)
            if problems:
                problem = problem.removeprefix("must be ")
            if problem not in problems:
                problems.append(problem)
        got = head(_as_json(errors[0].get("input")), 40)
        first = f"{field}: {' or '.join(problems)}; got {got}. Pass a value that fits."
    more = len(by_field) - 1
    return first if not more else f"{first} ({more} more argument(s) at fault.)"
