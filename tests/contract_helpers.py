"""What every refusal of the package must look like, shared by the contract and regression tests."""

from __future__ import annotations

import re
from collections.abc import Callable

CJK = re.compile(r"[\u4e00-\u9fff]")


def assert_contract_error(
    call: Callable[[], object], name: str, *phrases: str, kind: type[Exception] | None = None
) -> str:
    """`call` raises exactly ValueError/TypeError, one English then one Chinese line, both naming `name`.

    Each of `phrases` must appear somewhere in the message; `kind`, when given, is the error's class
    (TypeError for the wrong kind of thing, ValueError for a wrong value). Returns the message.
    """
    try:
        result = call()
    except (ValueError, TypeError) as error:
        if kind is not None and type(error) is not kind:
            raise AssertionError(f"expected {kind.__name__}, got {error!r}") from error
        if type(error).__module__.startswith("torch"):
            raise AssertionError(f"torch's own error leaked through: {error!r}") from error
        lines = str(error).splitlines()
        assert len(lines) == 2, f"expected an English and a Chinese line, got: {error}"
        english, chinese = lines
        assert not CJK.search(english) and CJK.search(chinese), f"not English then Chinese: {error}"
        assert name in english and name in chinese, f"`{name}` not named in both lines: {error}"
        for phrase in phrases:
            assert phrase in str(error), f"{phrase!r} not in: {error}"
        return str(error)
    raise AssertionError(f"bad input for `{name}` was accepted and gave {type(result).__name__}")
