"""``champion.json`` (:mod:`stsreg.product.champion_pin`): what a pin says, that an unchanged pin keeps its bytes (DVC
sees no change), that a missing or malformed file is read or refused as documented, and the weights digest."""

from __future__ import annotations

import pytest

from stsreg.infra.errors import InputError
from stsreg.product.champion_pin import NO_CHAMPION, PIN_FILE, Pin, read_pin, write_pin
from stsreg.product.model_files import weights_digest
from tests.conftest import REPO


def test_the_committed_pin_names_no_champion():
    """A fresh clone's stage 2 starts from stage 1, and its lock says so."""
    assert read_pin(REPO / PIN_FILE) == Pin(None) and Pin(None).words() == NO_CHAMPION
    assert (REPO / PIN_FILE).read_text() == Pin(None).text()


def test_a_pin_round_trips_and_an_unchanged_one_keeps_its_bytes(tmp_path):
    path = tmp_path / PIN_FILE
    pin = Pin(3, "a" * 32, "f" * 64, "default")
    assert write_pin(pin, path) and read_pin(path) == pin
    mtime = path.stat().st_mtime_ns
    assert not write_pin(pin, path) and path.stat().st_mtime_ns == mtime
    assert pin.words() == "champion v3 (run aaaaaaaa, weights ffffffff)"
    assert write_pin(Pin(None), path) and read_pin(path).version is None


def test_a_missing_pin_is_no_champion_and_a_malformed_one_is_refused(tmp_path):
    assert read_pin(tmp_path / "absent.json").version is None
    assert "no absent.json" in read_pin(tmp_path / "absent.json").why
    bad = tmp_path / PIN_FILE
    for text in ("{not json", '{"version": 2, "colour": "red"}'):
        bad.write_text(text)
        with pytest.raises(InputError, match=r"champion.json: not a champion pin .*`stsreg champion pin`"):
            read_pin(bad)


def test_the_digest_covers_the_weights_only(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"encoder")
    (tmp_path / "head.safetensors").write_bytes(b"head")
    before = weights_digest(tmp_path)
    (tmp_path / "README.md").write_text("a card the registry adds")
    assert weights_digest(tmp_path) == before and len(before) == 64
    (tmp_path / "head.safetensors").write_bytes(b"head, trained")
    assert weights_digest(tmp_path) != before
