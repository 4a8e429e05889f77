"""The pure domain: types, scopes, inputs, scoring, forgetting, reflection plans, prospective
memory and reply models. No I/O, no async: every equation and rule is testable in microseconds."""
