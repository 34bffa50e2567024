"""The one field checker the MLF reader, the graph reader and the board loader share."""

from __future__ import annotations

import pytest

from mlfbuild.checked import describe_value, is_kind, kind_name


@pytest.mark.parametrize("value, kind, expected", [
    (True, int, False), (False, (int, str), False), (True, (bool, int), True), (3, int, True),
    (3.0, int, False), ("3", (int, str), True), ([], list, True), ({}, list, False)])
def test_a_boolean_is_never_an_integer(value, kind, expected):
    assert is_kind(value, kind) is expected


@pytest.mark.parametrize("value, json, toml", [
    ({}, "an object", "a table"), ([1], "a list", "an array"), (True, "a boolean True", "a boolean true"),
    (7, "an integer 7", "an integer 7"), (1.5, "a number 1.5", "a float 1.5"), ("x", "a string 'x'", "a string 'x'"),
    ("y" * 100, "a string '" + "y" * 39 + "...", "a string '" + "y" * 39 + "..."), (None, "null", "NoneType")])
def test_values_are_named_in_each_formats_words(value, json, toml):
    assert describe_value(value) == json
    assert describe_value(value, "toml") == toml
    assert "\n" not in describe_value("a\nb")


def test_expected_kinds_read_as_words():
    assert kind_name((int, str)) == "an integer or a string"
    assert kind_name(dict, "toml") == "a table"
