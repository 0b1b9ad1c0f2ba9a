"""Delivered secrets are redacted from text and JSON-like values, in their obvious encodings."""

from __future__ import annotations

import base64
from urllib.parse import quote, quote_plus

from lattice_operator.redaction import REDACTED, Redactor

SECRET = "s3cr3t/Value+0f the=token"


def test_an_empty_redactor_changes_nothing() -> None:
    value = {"a": ["b", 1, None], "c": "d"}
    assert Redactor().value(value) is value


def test_every_form_is_redacted_in_text_keys_and_lists() -> None:
    redactor = Redactor()
    redactor.add(SECRET.encode())
    raw = SECRET.encode()
    forms = [
        SECRET,
        base64.b64encode(raw).decode(),
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(raw).decode(),
        quote(SECRET, safe=""),
        quote_plus(SECRET, safe=""),
    ]
    for form in forms:
        assert redactor.text(f"<{form}>") == f"<{REDACTED}>", form
    doc = {"message": f"x {SECRET} y", SECRET: [SECRET, 3], "n": 1.5}
    assert redactor.value(doc) == {
        "message": f"x {REDACTED} y",
        REDACTED: [REDACTED, 3],
        "n": 1.5,
    }


def test_each_line_of_a_multi_line_secret_is_redacted() -> None:
    redactor = Redactor()
    redactor.add("-----BEGIN KEY-----\nAAAABBBBCCCC\n-----END KEY-----\n")
    assert redactor.text("line: AAAABBBBCCCC") == f"line: {REDACTED}"


def test_very_short_values_are_not_redacted() -> None:
    redactor = Redactor()
    redactor.add("ab")
    assert not redactor.active
    assert redactor.text("about abc") == "about abc"
