"""The e2e tier's shards (scripts/controlplane/shards.py): whole files, balanced, on control planes that share nothing."""

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.controlplane import lifecycle, shards

files = st.lists(st.from_regex(r"tests/e2e/test_[a-z]{1,8}_e2e\.py", fullmatch=True), unique=True, max_size=30)
seconds = st.floats(min_value=0, max_value=5000, allow_nan=False)


@given(files, st.dictionaries(st.text(min_size=1), seconds), st.integers(1, 6), st.data())
def test_a_plan_runs_every_file_once_whole_and_balanced(names: list[str], extra: dict[str, float], n: int,
                                                         data: st.DataObject) -> None:
    # Invariants: every file runs exactly once, on one shard (a file's tests share its cluster's namespaces);
    # no shard is empty; longest-first keeps the busiest shard within one file of the least busy one.
    measured = {**extra, **{name: data.draw(seconds) for name in names if data.draw(st.booleans())}}
    plan = shards.plan(names, measured, n)
    placed = [f for s in plan for f in s.files]
    assert sorted(placed) == sorted(names)
    assert all(s.files for s in plan) and len(plan) <= n
    cost = {f: measured.get(f, shards.UNMEASURED_SECONDS) for f in names}
    for s in plan:
        assert s.planned == pytest.approx(sum(cost[f] for f in s.files))
    if len(plan) == n and names:
        assert max(s.planned for s in plan) - min(s.planned for s in plan) <= max(cost.values()) + 1e-6


def test_no_shard_count_below_one() -> None:
    with pytest.raises(ValueError, match="--shards 0"):
        shards.plan(["tests/e2e/test_a_e2e.py"], {}, 0)


@given(st.integers(0, 30))
def test_shards_share_no_port_address_range_or_folder_with_each_other_or_the_default_cluster(count: int) -> None:
    default = {"OFFHOURS_CLUSTER_DIR": str(lifecycle.STATE), "OFFHOURS_ETCD_PORT": str(lifecycle.ETCD_PORT),
               "OFFHOURS_API_PORT": str(lifecycle.API_PORT), "OFFHOURS_KUBELET_PORT": str(lifecycle.KUBELET_PORT),
               "OFFHOURS_POD_CIDR": lifecycle.POD_CIDR, "OFFHOURS_ARGO_METRICS_PORT": str(lifecycle.ARGO_METRICS_PORT)}
    envs = [default] + [{k: shards.Shard(i).env()[k] for k in default} for i in range(count)]
    for key in default:
        values = [env[key] for env in envs]
        assert len(set(values)) == len(values), key
    # etcd's peer port is its client port + 10: never another shard's client port.
    etcd = [int(env["OFFHOURS_ETCD_PORT"]) for env in envs]
    assert not {p + 10 for p in etcd} & set(etcd)
    cidrs = [env["OFFHOURS_POD_CIDR"].rsplit(".", 2)[0] for env in envs]  # the /16's first two octets
    assert len(set(cidrs)) == len(cidrs)


def test_a_junit_report_gives_each_files_counts_and_seconds(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite>'
        '<testcase classname="tests.e2e.test_demo_e2e" name="a" time="10.5"/>'
        '<testcase classname="tests.e2e.test_demo_e2e" name="b" time="2"><failure message="x"/></testcase>'
        '<testcase classname="tests.e2e.test_gate_e2e.TestTick" name="c" time="3"><skipped/></testcase>'
        '<testcase classname="tests.e2e.test_gate_e2e" name="d" time="1"><error message="y"/></testcase>'
        '</testsuite></testsuites>')
    outcome = shards.Outcome(shards.Shard(0), 1, "")
    shards.read_junit(report, outcome)
    assert (outcome.passed, outcome.failed, outcome.skipped) == (1, 2, 1)
    assert outcome.per_file == {"tests/e2e/test_demo_e2e.py": 12.5, "tests/e2e/test_gate_e2e.py": 4.0}


def test_recorded_durations_keep_the_files_not_run_this_time(tmp_path: Path) -> None:
    path = tmp_path / "e2e_durations.json"
    first = shards.Outcome(shards.Shard(0), 0, "", per_file={"tests/e2e/test_a_e2e.py": 5.0, "tests/e2e/test_b_e2e.py": 7})
    shards.record_durations([first], path)
    again = shards.Outcome(shards.Shard(1), 0, "", per_file={"tests/e2e/test_a_e2e.py": 6.3})
    shards.record_durations([again], path)
    assert shards.durations(path) == {"tests/e2e/test_a_e2e.py": 6.3, "tests/e2e/test_b_e2e.py": 7.0}
