"""Schemathesis hooks for the property-based API test (`openapi.rs`).

`error_shape` is the contract of every refusal (SPEC §4: a clear 4xx with the field and the
reason): `{"error": {"status", "field", "reason"}}`, the status the response's own, the reason
in plain words rather than serde's or axum's. `keep_run_token` keeps the run's own credentials:
revoking the admin token the run authenticates with would turn every later request into a 401,
which has the error shape, so the rest of the run would test nothing.
"""

import json
import os
import re

import schemathesis

# Fragments of serde's, axum's and Rust's own messages: a reason with one of them was passed
# through instead of being said in plain words (`vantage_core::plain`).
JARGON = (
    " at line ",
    "invalid type: ",
    "invalid value: ",
    "unknown variant",
    "missing field",
    "Failed to ",
    "Cannot parse",
    "struct ",
    "i64",
    "u64",
    "u32",
    "u16",
    "usize",
    "f64",
)

QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')

RUN_TOKEN_ID = os.environ.get("VANTAGE_RUN_TOKEN_ID")


@schemathesis.check
def error_shape(ctx, response, case):
    """Every 4xx and 5xx answer is `{"error": {"status", "field"?, "reason"}}` in plain words."""
    if response.status_code < 400:
        return None
    try:
        body = json.loads(response.content)
    except ValueError as e:
        raise AssertionError(f"the {response.status_code} body is not JSON ({e}): {response.content[:200]!r}")
    if not isinstance(body, dict) or set(body) != {"error"} or not isinstance(body["error"], dict):
        raise AssertionError(f'the {response.status_code} body is not {{"error": {{…}}}}: {body!r}')
    error = body["error"]
    extra = set(error) - {"status", "field", "reason"}
    if extra:
        raise AssertionError(f"the error has fields beyond status, field and reason: {sorted(extra)}")
    if error.get("status") != response.status_code:
        raise AssertionError(f"error.status is {error.get('status')!r}, the response's is {response.status_code}")
    field = error.get("field")
    if field is not None and (not isinstance(field, str) or not field):
        raise AssertionError(f"error.field is not a field name: {field!r}")
    reason = error.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise AssertionError(f"error.reason is missing or empty: {reason!r}")
    # What the request sent comes back quoted ("…" with Rust's escapes): not the server's words.
    own = QUOTED.sub('""', reason)
    words = [j for j in JARGON if j in own]
    if words:
        raise AssertionError(f"error.reason is not in plain words ({', '.join(map(repr, words))}): {reason!r}")
    return None


@schemathesis.hook
def filter_case(ctx, case):
    """Leaves out only the revocation of the run's own admin token."""
    op = case.operation
    if RUN_TOKEN_ID is None or op.method.upper() != "DELETE" or op.path != "/v1/admin-tokens/{id}":
        return True
    return str((case.path_parameters or {}).get("id")) != RUN_TOKEN_ID
