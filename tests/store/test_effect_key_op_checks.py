"""An effect-key op is refused exactly when one of its ids or its key fails its own check.

``apply`` checks a well-formed op with bare matches (no Python call); these tests pin them to
the checks they stand for (``check_identifier`` on the namespace, call id and the call it
replaces, the fingerprint form on the key), whatever the strings.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolledger as tl
from toolledger.checkpoint.model import check_identifier
from toolledger.store.base import ClaimEffectKey, ReleaseEffectKey
from toolledger.testing import MemoryStore

_KEY = "sha256:" + "ab" * 32
_ID_CHARS = st.sampled_from("aZ09._:-/+= \n\x00\u00e9\u0663")
_IDS = st.one_of(
    st.text(_ID_CHARS, min_size=0, max_size=4),
    st.text(st.sampled_from("ab"), min_size=126, max_size=130),
    st.sampled_from(["ns", "call-1", "a" * 128, "a" * 129, "x\n", "\u0661"]),
)
_KEYS = st.one_of(
    st.just(_KEY),
    st.sampled_from(["sha256:" + "A" * 64, "sha256:" + "a" * 63, _KEY + "\n", "order-17", ""]),
    st.text(st.sampled_from("sha256:0f\x00"), max_size=72),
)


def _valid(value: str) -> bool:
    try:
        check_identifier(value, "id")
    except tl.InvalidArgumentError:
        return False
    return True


def _refused(op: ClaimEffectKey | ReleaseEffectKey) -> bool:
    try:
        MemoryStore().apply([op])
    except tl.InvalidArgumentError:
        return True
    return False


class TestEffectKeyOpChecks:
    @settings(max_examples=300, deadline=None)
    @given(namespace=_IDS, call_id=_IDS, key=_KEYS)
    def test_claim_is_refused_iff_a_field_fails_its_check(
        self, namespace: str, call_id: str, key: str
    ) -> None:
        """A claim is refused exactly when an id or the key is malformed."""
        ok = _valid(namespace) and _valid(call_id) and _is_key(key)
        assert _refused(ClaimEffectKey(namespace, key, call_id)) is not ok

    @settings(max_examples=100, deadline=None)
    @given(namespace=_IDS, call_id=_IDS)
    def test_release_is_refused_iff_an_id_fails_its_check(
        self, namespace: str, call_id: str
    ) -> None:
        """A release is refused exactly when an id is malformed."""
        ok = _valid(namespace) and _valid(call_id)
        assert _refused(ReleaseEffectKey(namespace, _KEY, call_id)) is not ok

    @pytest.mark.parametrize("replaces", ["call-0", "bad id", ""])
    def test_claim_checks_the_call_it_replaces(self, replaces: str) -> None:
        """A claim taking a key over names a well-formed call id."""
        op = ClaimEffectKey("ns", _KEY, "call-1", replaces=replaces)
        assert _refused(op) is not _valid(replaces)


def _is_key(key: str) -> bool:
    hex_part = key[len("sha256:") :]
    return (
        key.startswith("sha256:")
        and len(hex_part) == 64
        and all(c in "0123456789abcdef" for c in hex_part)
    )
