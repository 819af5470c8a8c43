"""schemathesis against a live server's ``/openapi.json``: every operation, ``examples`` generated cases each, the
checks that hold for any request (no 5xx; status, content type and body as described). Returns the failures as
text (empty: the contract holds)."""

from __future__ import annotations


def check_contract(url: str, examples: int = 30) -> list[str]:
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (content_type_conformance, response_schema_conformance,
                                                   status_code_conformance)

    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
    failures, operations = [], 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None,
                  phases=[Phase.explicit, Phase.generate])
        @given(case=operation.as_strategy())
        def run(case):
            case.call_and_validate(base_url=url, checks=checks)

        try:
            run()
        except Exception as exc:  # noqa: BLE001 (every operation is tried; the failures are the result)
            failures.append(f"{operation.label}: {type(exc).__name__}: {str(exc)[:1500]}")
    assert operations >= 10, f"only {operations} operations described"
    return failures
