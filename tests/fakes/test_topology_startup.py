"""Topology at engine start-up: the env variables and files of both spellings, and the hard exit.

The first half runs ``servecert engine serve`` in a subprocess (refusals exit 2 and name the
variable or file at fault; good settings show up in ``GET /engine/metadata``); the second half
calls ``servecert.fakes.topology_env.load`` directly with a dict environment.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from servecert.fakes import topology_env
from servecert.fakes.topology_env import TopologyConfig, TopologyStartupError
from tests.conftest import serve_command, serve_process

SERVE_ARGS = ("--model", "m", "--port", "0", "--time-scale", "0")
EXIT_STARTUP = 2


@pytest.fixture(autouse=True)
def no_inherited_topology(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests' own DYN_* variables must not leak into the engines they start."""
    for name in list(os.environ):
        if name.startswith("DYN_"):
            monkeypatch.delenv(name)


def write_domains(folder: Path, **domains: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for level, value in domains.items():
        (folder / level).write_text(value + "\n")
    return folder


def enabled_env(folder: Path, **extra: str) -> dict[str, str]:
    return {"DYN_TOPOLOGY_ENABLED": "true", "DYN_TOPOLOGY_MOUNT_PATH": str(folder), "DYN_TOPOLOGY_WAIT_SECONDS": "0.5", **extra}


OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only: never a proxy


def get_json(url: str) -> Any:
    with OPENER.open(url, timeout=10) as resp:
        return json.loads(resp.read())


def runtime_config(env: dict[str, str], *args: str) -> dict[str, Any]:
    with serve_process(*SERVE_ARGS, *args, env=env) as served:
        return dict(get_json(served.urls[0] + "/engine/metadata")["runtime_config"])


# -- refusals: exit 2, naming the cause -----------------------------------------------------------
BAD_VARIABLES = {  # case id -> (variables added to a good setting, the variable the refusal must name)
    # (more spellings of each mistake are covered by the fast tests of ``load`` below)
    "bogus-enforcement": ({"DYN_KV_TRANSFER_ENFORCEMENT": "bogus"}, "DYN_KV_TRANSFER_ENFORCEMENT"),
    "preferred-without-weight": ({"DYN_KV_TRANSFER_ENFORCEMENT": "preferred"}, "DYN_KV_TRANSFER_PREFERRED_WEIGHT"),
    "weight-with-required": (
        {"DYN_KV_TRANSFER_ENFORCEMENT": "required", "DYN_KV_TRANSFER_PREFERRED_WEIGHT": "0.5"},
        "DYN_KV_TRANSFER_PREFERRED_WEIGHT",
    ),
    "nan-weight": (
        {"DYN_KV_TRANSFER_ENFORCEMENT": "preferred", "DYN_KV_TRANSFER_PREFERRED_WEIGHT": "nan"},
        "DYN_KV_TRANSFER_PREFERRED_WEIGHT",
    ),
    "enabled-maybe": ({"DYN_TOPOLOGY_ENABLED": "maybe"}, "DYN_TOPOLOGY_ENABLED"),
}
FILE_CASES = ["missing-level-file", "seed-spelling-missing-level-file"]
REFUSAL_IDS = [*FILE_CASES, *BAD_VARIABLES, "bad-direct-topology-flag"]


@dataclass(frozen=True)
class Refusal:
    returncode: int | None
    stdout: str
    stderr: str
    must_name: tuple[str, ...]


def refusal_setups(root: Path) -> dict[str, tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]]:
    """case id -> (environment, extra arguments, what stderr must name)."""
    setups: dict[str, tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]] = {}
    folder = write_domains(root / "rack-only", rack="r1")
    setups["missing-level-file"] = (
        enabled_env(folder, DYN_KV_TRANSFER_DOMAIN="zone"), (), (str(folder / "zone"), "DYN_TOPOLOGY_ENABLED")
    )
    folder = write_domains(root / "zone-only", zone="a")
    setups["seed-spelling-missing-level-file"] = (
        enabled_env(folder, DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL="rack"), (), (str(folder / "rack"),)
    )
    good = write_domains(root / "good", zone="a", rack="r1")  # the files are fine: only the variable is bad
    for case, (extra, named) in BAD_VARIABLES.items():
        setups[case] = (enabled_env(good, DYN_KV_TRANSFER_DOMAIN="zone", **extra), (), (named,))
    setups["bad-direct-topology-flag"] = ({}, ("--topology", "zone"), ("--topology",))
    return setups


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Refusal]:
    """Every refused start-up, run side by side (each process exits on its own, well within 30 s)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DYN_")}
    setups = refusal_setups(tmp_path_factory.mktemp("refusals"))
    procs = {
        case: subprocess.Popen(serve_command(*SERVE_ARGS, *args), env=base | env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        for case, (env, args, _) in setups.items()
    }
    out: dict[str, Refusal] = {}
    try:
        for case, proc in procs.items():
            try:
                stdout, stderr = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
                out[case] = Refusal(None, stdout, stderr + "\n(still running after 30 s: killed)", setups[case][2])
                continue
            out[case] = Refusal(proc.returncode, stdout, stderr, setups[case][2])
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return out


@pytest.mark.parametrize("case", REFUSAL_IDS)
def test_a_bad_start_up_setting_is_a_hard_exit_naming_the_cause(refusals: dict[str, Refusal], case: str) -> None:
    refusal = refusals[case]
    assert refusal.returncode == EXIT_STARTUP, (refusal.stdout, refusal.stderr)
    for name in refusal.must_name:
        assert name in refusal.stderr
    assert "Traceback" not in refusal.stderr
    assert len(refusal.stderr.strip().splitlines()) == 1, refusal.stderr
    assert "ready" not in refusal.stdout


# -- engines that start ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Started:
    runtime_config: dict[str, Any]
    records: list[dict[str, Any]]  # the ground truth after one completion


def observe(env: dict[str, str], args: tuple[str, ...]) -> Started:
    """Start an engine, read its metadata, serve one completion, read its ground truth, stop it."""
    with serve_process(*SERVE_ARGS, *args, env=env) as served:
        url = served.urls[0]
        cfg = dict(get_json(url + "/engine/metadata")["runtime_config"])
        body = json.dumps({"model": "m", "prompt": "where am i", "max_tokens": 2}).encode()
        request = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
        with OPENER.open(request, timeout=10) as resp:
            assert resp.status == 200
        return Started(cfg, list(get_json(url + "/groundtruth")["records"]))


def start_setups(root: Path) -> dict[str, tuple[dict[str, str], tuple[str, ...]]]:
    """case id -> (environment, extra arguments) of an engine that must start."""
    files = write_domains(root / "files", zone="a", rack="r1")
    (files / ".data").write_text("hidden\n")  # hidden: a projected volume's bookkeeping
    (files / "host").write_text("")  # empty: the label is not set
    (files / "block").write_text("  \n")  # blank: likewise
    (files / "nested").mkdir()
    empty = root / "empty"
    empty.mkdir()
    # A level and a 600 s wait on an empty folder: an engine that read topology here would not start.
    unread = {"DYN_TOPOLOGY_MOUNT_PATH": str(empty), "DYN_KV_TRANSFER_DOMAIN": "zone", "DYN_TOPOLOGY_WAIT_SECONDS": "600"}
    return {
        "files": (enabled_env(files, DYN_KV_TRANSFER_DOMAIN="zone"), ()),
        "preferred": (
            enabled_env(files, DYN_KV_TRANSFER_DOMAIN="rack", DYN_KV_TRANSFER_ENFORCEMENT="preferred",
                        DYN_KV_TRANSFER_PREFERRED_WEIGHT="0.25"),
            (),
        ),
        "seed-spelling": (enabled_env(files, DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL="rack"), ()),
        "enabled-unset": (unread, ()),
        "enabled-false": ({**unread, "DYN_TOPOLOGY_ENABLED": "false"}, ()),
        "direct-flag": ({**unread, "DYN_TOPOLOGY_ENABLED": "true"}, ("--topology", "zone=b,rack=r2")),
    }


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Started | BaseException]:
    """Every engine that must start, started side by side (each through ``serve_process``)."""
    setups = start_setups(tmp_path_factory.mktemp("starts"))
    out: dict[str, Started | BaseException] = {}
    with ThreadPoolExecutor(max_workers=len(setups)) as pool:
        futures = {case: pool.submit(observe, env, args) for case, (env, args) in setups.items()}
        for case, future in futures.items():
            try:
                out[case] = future.result(timeout=60)
            except Exception as exc:  # reported by the test of that case
                out[case] = exc
    return out


def outcome(started: dict[str, Started | BaseException], case: str) -> Started:
    result = started[case]
    if isinstance(result, BaseException):
        raise result
    return result


def test_present_files_become_the_engines_topology_in_its_metadata_and_ground_truth(
    started: dict[str, Started | BaseException],
) -> None:
    run = outcome(started, "files")
    cfg = run.runtime_config
    assert cfg["enabled"] is True
    assert cfg["topology_domains"] == {"zone": "a", "rack": "r1"}  # not .data, host, block or nested/
    assert cfg["kv_transfer_domain"] == "zone"
    assert cfg["kv_transfer_enforcement"] == "required"
    assert cfg["kv_transfer_preferred_weight"] is None
    assert [r["domains"] for r in run.records] == [{"zone": "a", "rack": "r1"}]


def test_preferred_enforcement_with_a_weight_is_published(started: dict[str, Started | BaseException]) -> None:
    cfg = outcome(started, "preferred").runtime_config
    assert cfg["topology_domains"] == {"zone": "a", "rack": "r1"}
    assert cfg["kv_transfer_domain"] == "rack"
    assert cfg["kv_transfer_enforcement"] == "preferred"
    assert cfg["kv_transfer_preferred_weight"] == 0.25


def test_the_seed_spelling_starts_an_engine_in_its_domains(started: dict[str, Started | BaseException]) -> None:
    cfg = outcome(started, "seed-spelling").runtime_config
    assert cfg["topology_domains"] == {"zone": "a", "rack": "r1"}
    assert cfg["kv_transfer_domain"] == "rack"
    assert cfg["kv_transfer_enforcement"] == "required"


@pytest.mark.parametrize("case", ["enabled-unset", "enabled-false"])
def test_without_topology_enabled_the_engine_starts_at_once_with_no_topology(
    started: dict[str, Started | BaseException], case: str
) -> None:
    run = outcome(started, case)
    assert run.runtime_config["enabled"] is False
    assert run.runtime_config["topology_domains"] == {}
    assert run.runtime_config["kv_transfer_domain"] is None
    assert [r["domains"] for r in run.records] == [{}]


def test_the_direct_topology_flag_needs_no_files(started: dict[str, Started | BaseException]) -> None:
    cfg = outcome(started, "direct-flag").runtime_config
    assert cfg["enabled"] is True
    assert cfg["topology_domains"] == {"zone": "b", "rack": "r2"}


def test_a_file_written_after_start_up_lets_the_engine_start(tmp_path: Path) -> None:
    folder = tmp_path / "topology"
    folder.mkdir()

    def project() -> None:
        staged = folder / ".zone.tmp"  # hidden while written, then renamed into place
        staged.write_text("late\n")
        staged.rename(folder / "zone")

    timer = threading.Timer(0.3, project)
    timer.start()
    try:
        cfg = runtime_config(enabled_env(folder, DYN_KV_TRANSFER_DOMAIN="zone", DYN_TOPOLOGY_WAIT_SECONDS="5"))
    finally:
        timer.cancel()
        timer.join(timeout=5)
    assert cfg["topology_domains"] == {"zone": "late"}
    assert cfg["kv_transfer_domain"] == "zone"


# -- servecert.fakes.topology_env.load, directly -------------------------------------------------------------
def load(env: dict[str, str]) -> TopologyConfig:
    return topology_env.load(env, poll_interval=0.01)


@pytest.mark.parametrize("value", [None, "false", "False", "0", "off", "no", "", "  "])
def test_load_is_disabled_unless_asked(value: str | None, tmp_path: Path) -> None:
    env = {"DYN_TOPOLOGY_MOUNT_PATH": str(tmp_path), "DYN_KV_TRANSFER_DOMAIN": "zone", "DYN_KV_TRANSFER_ENFORCEMENT": "preferred"}
    if value is not None:
        env["DYN_TOPOLOGY_ENABLED"] = value
    topo = load(env)
    assert topo == TopologyConfig()
    assert topo.to_dict() == {
        "enabled": False,
        "topology_domains": {},
        "kv_transfer_domain": None,
        "kv_transfer_enforcement": "required",
        "kv_transfer_preferred_weight": None,
    }


@pytest.mark.parametrize("value", ["true", "TRUE", " True ", "1", "on", "yes"])
def test_load_accepts_every_spelling_of_true(value: str, tmp_path: Path) -> None:
    write_domains(tmp_path, zone="a")
    topo = load({"DYN_TOPOLOGY_ENABLED": value, "DYN_TOPOLOGY_MOUNT_PATH": str(tmp_path), "DYN_TOPOLOGY_WAIT_SECONDS": "0"})
    assert topo.enabled and topo.domains == {"zone": "a"}
    assert topo.mount_path == str(tmp_path)


@pytest.mark.parametrize("value", ["maybe", "2", "enabled", "tru"])
def test_load_refuses_a_non_boolean_enabled_naming_the_variable(value: str) -> None:
    with pytest.raises(TopologyStartupError, match="DYN_TOPOLOGY_ENABLED") as caught:
        load({"DYN_TOPOLOGY_ENABLED": value})
    assert repr(value) in str(caught.value)


def test_load_reads_visible_non_empty_files_stripped(tmp_path: Path) -> None:
    write_domains(tmp_path, zone="  us-east-1a ", rack="r1")
    (tmp_path / ".data").write_text("x")
    (tmp_path / "..2026_01_01").mkdir()
    (tmp_path / "host").write_text("")
    (tmp_path / "block").write_text("\n\t \n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "region").write_text("eu")
    topo = load(enabled_env(tmp_path, DYN_KV_TRANSFER_DOMAIN="zone"))
    assert topo.domains == {"zone": "us-east-1a", "rack": "r1"}
    assert topo.transfer_domain == "zone"
    assert topo.to_dict()["topology_domains"] == {"zone": "us-east-1a", "rack": "r1"}


def test_load_names_the_missing_level_file(tmp_path: Path) -> None:
    write_domains(tmp_path, rack="r1")
    with pytest.raises(TopologyStartupError) as caught:
        load(enabled_env(tmp_path, DYN_KV_TRANSFER_DOMAIN="zone", DYN_TOPOLOGY_WAIT_SECONDS="0"))
    assert str(tmp_path / "zone") in str(caught.value)


@pytest.mark.parametrize("content", ["", " \n"], ids=["empty", "blank"])
def test_load_treats_an_empty_level_file_as_missing(tmp_path: Path, content: str) -> None:
    (tmp_path / "zone").write_text(content)
    with pytest.raises(TopologyStartupError, match="zone"):
        load(enabled_env(tmp_path, DYN_KV_TRANSFER_DOMAIN="zone", DYN_TOPOLOGY_WAIT_SECONDS="0"))


def test_load_without_a_level_needs_any_file(tmp_path: Path) -> None:
    (tmp_path / ".hidden").write_text("x")
    with pytest.raises(TopologyStartupError, match="any topology file") as caught:
        load(enabled_env(tmp_path, DYN_TOPOLOGY_WAIT_SECONDS="0"))
    assert str(tmp_path) in str(caught.value)
    write_domains(tmp_path, host="h1")
    topo = load(enabled_env(tmp_path, DYN_TOPOLOGY_WAIT_SECONDS="0"))
    assert topo.domains == {"host": "h1"}
    assert topo.transfer_domain is None


def test_load_prefers_the_dynamo_spelling_of_the_level_over_the_seed_spelling(tmp_path: Path) -> None:
    write_domains(tmp_path, zone="a", rack="r1")
    env = enabled_env(tmp_path, DYN_KV_TRANSFER_DOMAIN="zone", DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL="rack")
    assert load(env).transfer_domain == "zone"
    del env["DYN_KV_TRANSFER_DOMAIN"]
    assert load(env).transfer_domain == "rack"


def test_load_defaults_to_the_seed_mount_path(tmp_path: Path) -> None:
    if Path(topology_env.SEED_MOUNT_PATH).exists():
        pytest.skip(f"{topology_env.SEED_MOUNT_PATH} exists on this machine")
    with pytest.raises(TopologyStartupError) as caught:
        load({"DYN_TOPOLOGY_ENABLED": "true", "DYN_KV_TRANSFER_DOMAIN": "zone", "DYN_TOPOLOGY_WAIT_SECONDS": "0"})
    assert f"{topology_env.SEED_MOUNT_PATH}/zone" in str(caught.value)


@pytest.mark.parametrize(
    ("enforcement", "weight", "expected"),
    [
        (None, None, ("required", None)),
        ("", None, ("required", None)),
        ("required", None, ("required", None)),
        (" Required ", "", ("required", None)),
        ("preferred", "0.5", ("preferred", 0.5)),
        ("PREFERRED", " 2 ", ("preferred", 2.0)),
        ("preferred", "1e-3", ("preferred", 0.001)),
        ("preferred", "0", ("preferred", 0.0)),
    ],
    ids=["default", "empty", "required", "required-blank-weight", "preferred", "preferred-upper", "preferred-exp", "zero"],
)
def test_load_reads_the_transfer_policy(
    tmp_path: Path, enforcement: str | None, weight: str | None, expected: tuple[str, float | None]
) -> None:
    write_domains(tmp_path, zone="a")
    env = enabled_env(tmp_path, DYN_KV_TRANSFER_DOMAIN="zone")
    if enforcement is not None:
        env["DYN_KV_TRANSFER_ENFORCEMENT"] = enforcement
    if weight is not None:
        env["DYN_KV_TRANSFER_PREFERRED_WEIGHT"] = weight
    topo = load(env)
    assert (topo.enforcement, topo.preferred_weight) == expected
    assert topo.to_dict()["kv_transfer_enforcement"] == expected[0]
    assert topo.to_dict()["kv_transfer_preferred_weight"] == expected[1]


@pytest.mark.parametrize(
    ("enforcement", "weight", "named"),
    [
        ("bogus", None, "DYN_KV_TRANSFER_ENFORCEMENT"),
        ("strict", "1", "DYN_KV_TRANSFER_ENFORCEMENT"),
        ("preferred", None, "DYN_KV_TRANSFER_PREFERRED_WEIGHT"),
        ("preferred", "  ", "DYN_KV_TRANSFER_PREFERRED_WEIGHT"),
        ("required", "0.5", "DYN_KV_TRANSFER_PREFERRED_WEIGHT"),
        (None, "0.5", "DYN_KV_TRANSFER_PREFERRED_WEIGHT"),
        ("preferred", "nan", "DYN_KV_TRANSFER_PREFERRED_WEIGHT"),
        ("preferred", "-inf", "DYN_KV_TRANSFER_PREFERRED_WEIGHT"),
        ("preferred", "half", "DYN_KV_TRANSFER_PREFERRED_WEIGHT"),
    ],
    ids=["bogus", "strict-with-weight", "preferred-no-weight", "preferred-blank-weight", "required-with-weight",
         "default-with-weight", "nan", "minus-inf", "not-a-number"],
)
def test_load_refuses_a_bad_transfer_policy_before_waiting_for_files(
    tmp_path: Path, enforcement: str | None, weight: str | None, named: str
) -> None:
    # No files and a long wait: a policy error must be raised first, not the missing-file one.
    env = enabled_env(tmp_path / "empty", DYN_KV_TRANSFER_DOMAIN="zone", DYN_TOPOLOGY_WAIT_SECONDS="600")
    if enforcement is not None:
        env["DYN_KV_TRANSFER_ENFORCEMENT"] = enforcement
    if weight is not None:
        env["DYN_KV_TRANSFER_PREFERRED_WEIGHT"] = weight
    with pytest.raises(TopologyStartupError, match=named):
        load(env)


@pytest.mark.parametrize("wait", ["soon", "-1", "nan", "inf"])
def test_load_refuses_a_bad_wait(tmp_path: Path, wait: str) -> None:
    with pytest.raises(TopologyStartupError, match="DYN_TOPOLOGY_WAIT_SECONDS"):
        load(enabled_env(tmp_path, DYN_TOPOLOGY_WAIT_SECONDS=wait))


def test_load_waits_for_a_file_that_appears_later(tmp_path: Path) -> None:
    timer = threading.Timer(0.2, lambda: write_domains(tmp_path, zone="z9"))
    timer.start()
    try:
        topo = load(enabled_env(tmp_path, DYN_KV_TRANSFER_DOMAIN="zone", DYN_TOPOLOGY_WAIT_SECONDS="10"))
    finally:
        timer.cancel()
        timer.join(timeout=5)
    assert topo.domains == {"zone": "z9"}


def test_parse_domains_reads_the_direct_spelling() -> None:
    assert topology_env.parse_domains("zone=a, rack = r1,,host=h1") == {"zone": "a", "rack": "r1", "host": "h1"}
    assert topology_env.parse_domains("") == {}


@pytest.mark.parametrize("spec", ["zone", "zone=", "=a", "zone=a,rack"])
def test_parse_domains_refuses_items_without_a_value(spec: str) -> None:
    with pytest.raises(TopologyStartupError, match="level=value"):
        topology_env.parse_domains(spec)


def test_the_published_weight_is_a_finite_number(tmp_path: Path) -> None:
    write_domains(tmp_path, zone="a")
    env = enabled_env(tmp_path, DYN_KV_TRANSFER_ENFORCEMENT="preferred", DYN_KV_TRANSFER_PREFERRED_WEIGHT="0.75")
    weight = load(env).to_dict()["kv_transfer_preferred_weight"]
    assert isinstance(weight, float) and math.isfinite(weight)
