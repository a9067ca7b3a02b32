"""``servecert engine serve`` takes any option from ``SERVECERT_ENGINE_<OPTION>``; the command line wins.

Seed 001's worker changes are to "command, args, or environment variables": ROLLOUT-ISOLATION's
env case rolls a block size given in the pod's env, so the engine must read it there.
"""

from __future__ import annotations

import argparse

import pytest

from servecert.fakes import serve


def parse(environ: dict[str, str], *argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="servecert engine serve", exit_on_error=False)
    serve.add_arguments(p)
    p.set_defaults(**serve.env_defaults(p, environ))
    return p.parse_args(["--model", "m", *argv])


def test_an_option_comes_from_the_environment_converted_by_its_type() -> None:
    args = parse({"SERVECERT_ENGINE_BLOCK_SIZE": "32", "SERVECERT_ENGINE_NO_PREFIX_CACHING": "true"})
    assert (args.block_size, args.no_prefix_caching) == (32, True)
    assert serve.config_from_args(args).block_size == 32


def test_the_command_line_wins_over_the_environment() -> None:
    assert parse({"SERVECERT_ENGINE_BLOCK_SIZE": "32"}, "--block-size", "64").block_size == 64


def test_without_the_variable_the_default_holds() -> None:
    assert parse({}).block_size == 16


def test_a_bad_value_is_refused_naming_the_option() -> None:
    with pytest.raises(argparse.ArgumentError, match="--block-size: invalid int value: 'big'"):
        parse({"SERVECERT_ENGINE_BLOCK_SIZE": "big"})
