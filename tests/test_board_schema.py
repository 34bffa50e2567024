"""boards/board.schema.json, the board file's published shape, agrees with the parser
(mlfbuild/boards.py): every shipped board is valid, and a key added, removed or given the wrong
type is refused by both or by neither."""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path

import jsonschema
import pytest

from mlfbuild import boards
from mlfbuild.boards import board_from_data, boards_dir
from mlfbuild.errors import BoardError

SCHEMA = json.loads((boards_dir() / "board.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
BOARD_FILES = sorted(boards_dir().glob("*.toml"))


def _data(path: Path) -> dict:
    return tomllib.loads(path.read_text())


def _parser_accepts(path: Path, data: dict) -> bool:
    try:
        board_from_data(path, data)
    except BoardError:
        return False
    return True


def _schema_accepts(data: dict) -> bool:
    return VALIDATOR.is_valid(data)


def _tables(data: dict, where: tuple = ()):
    """Every table in a board file's data, with the path to it (array items included)."""
    yield where, data
    for key, value in data.items():
        if isinstance(value, dict):
            yield from _tables(value, where + (key,))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for index, item in enumerate(value):
                yield from _tables(item, where + (key, index))


def _at(data: dict, where: tuple) -> dict:
    for step in where:
        data = data[step]
    return data


def test_the_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("path", BOARD_FILES, ids=lambda p: p.stem)
def test_every_shipped_board_matches_the_schema(path):
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(_data(path))]
    assert errors == []


def test_the_schemas_choices_are_the_parsers():
    props = SCHEMA["properties"]
    assert tuple(props["kind"]["enum"]) == boards.KINDS
    assert tuple(props["cpu"]["properties"]["float_abi"]["enum"]) == boards.FLOAT_ABIS
    assert tuple(props["console"]["properties"]["uart"]["enum"]) == boards.UARTS
    assert tuple(props["flashing"]["properties"]["method"]["enum"]) == boards.FLASH_METHODS
    assert tuple(props["flashing"]["properties"]["reset"]["enum"]) == boards.RESET_METHODS


@pytest.mark.parametrize("path", BOARD_FILES, ids=lambda p: p.stem)
def test_an_unknown_key_is_refused_by_both_in_every_table(path):
    for where, _ in _tables(_data(path)):
        data = _data(path)
        _at(data, where)["colour"] = "red"
        assert not _parser_accepts(path, data) and not _schema_accepts(data), where


@pytest.mark.parametrize("path", BOARD_FILES, ids=lambda p: p.stem)
def test_removing_any_key_is_refused_by_both_or_neither(path):
    original = _data(path)
    for where, table in _tables(original):
        for key in table:
            data = copy.deepcopy(original)
            del _at(data, where)[key]
            assert _parser_accepts(path, data) == _schema_accepts(data), (where, key)


@pytest.mark.parametrize("path", BOARD_FILES, ids=lambda p: p.stem)
def test_a_value_of_the_wrong_type_is_refused_by_both(path):
    original = _data(path)
    for where, table in _tables(original):
        for key, value in table.items():
            if isinstance(value, dict):
                continue
            data = copy.deepcopy(original)
            _at(data, where)[key] = "text" if not isinstance(value, str) else 7
            assert not _parser_accepts(path, data) and not _schema_accepts(data), (where, key)


@pytest.mark.parametrize("path", BOARD_FILES, ids=lambda p: p.stem)
def test_another_kind_is_refused_by_both(path):
    original = _data(path)
    for kind in boards.KINDS:
        if kind != original["kind"]:
            data = dict(original, kind=kind)
            assert not _parser_accepts(path, data) and not _schema_accepts(data), kind
