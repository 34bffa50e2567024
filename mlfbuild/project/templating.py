"""The jinja2 environment every rendered file (project, library, export) comes from, with the C filters
its templates use."""

from __future__ import annotations

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from ..mlf.model import c_identifier
from ..resources import data_dir
from .ctext import c_comment_text, c_string_body


def template_environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(data_dir("templates"))), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["format_include"] = lambda path: f"-I{path}"
    env.filters["c_string"] = c_string_body
    env.filters["c_comment"] = c_comment_text
    env.filters["c_macro"] = lambda name: c_identifier(name).upper()
    env.filters["c_identifier"] = c_identifier
    return env
