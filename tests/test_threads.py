"""``threads=auto``: reading the idle cores, and a warning for an explicit count above them."""

import warnings

import pytest

from eval import threads

STAT_BEFORE = """cpu  300 0 100 600 0 0 0 0 0 0
cpu0 100 0 50 350 0 0 0 0 0 0
cpu1 200 0 50 250 0 0 0 0 0 0
intr 12 0 0
"""
STAT_AFTER = """cpu  500 0 100 650 0 0 0 0 0 0
cpu0 110 0 50 440 0 0 0 0 0 0
cpu1 290 0 50 260 0 0 0 0 0 0
procs_running 3
"""


def test_proc_stat_is_read_per_cpu_and_idle_is_each_cores_idle_share():
    before, after = threads.cpu_times(STAT_BEFORE), threads.cpu_times(STAT_AFTER)
    assert before == {0: (350, 500), 1: (250, 500)}                  # the aggregate "cpu" line is skipped
    assert threads.idle_share(before, after, [0, 1]) == pytest.approx(0.9 + 0.1)
    assert threads.idle_share(before, after, [0]) == pytest.approx(0.9)       # only the usable CPUs count
    assert threads.idle_share(before, after, [0, 7]) == pytest.approx(0.9)    # a CPU the kernel does not list
    assert threads.cpu_times("cpu0 1 2 3 4 5 6 7 8\n") == {0: (9, 36)}      # iowait counts as idle


def test_free_cores_on_this_machine_is_within_its_usable_cores():
    usable, idle, how = threads.free_cores(sample_seconds=0.05)
    cpus, most = threads.usable_cpus()
    assert usable == most <= len(cpus) and usable >= 1 and 0 <= idle <= usable
    assert f"of {len(cpus)} busy over 0.05 s" in how or "load" in how


def test_a_cgroup_quota_caps_the_usable_and_the_idle_cores(monkeypatch):
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6, 7}, raising=False)
    monkeypatch.setattr(threads, "_cgroup_quota", lambda: 1.5)              # cpu.max "150000 100000"
    assert threads.usable_cpus() == (list(range(8)), 2)
    usable, idle, _ = threads.free_cores(sample_seconds=0.01)
    assert usable == 2 and idle <= 2
    monkeypatch.setattr(threads, "_cgroup_quota", lambda: None)
    assert threads.usable_cpus() == (list(range(8)), 8)


def machine(monkeypatch, usable, idle):
    monkeypatch.setattr(threads, "free_cores", lambda: (usable, idle, f"{usable - idle} busy"))
    monkeypatch.setattr(threads, "_auto", None)
    monkeypatch.setattr(threads, "_checked", False)


def test_auto_takes_the_idle_cores_and_never_zero(monkeypatch):
    for usable, idle, expected in ((8, 8, 8), (8, 2, 2), (2, 0, 1), (2, 2, 2)):
        machine(monkeypatch, usable, idle)
        assert threads.resolve_threads("auto") == expected
    machine(monkeypatch, 2, 0)
    assert threads.resolve_threads("auto") == 1 and threads.auto_reading == "2 cores, 2 busy"
    monkeypatch.setattr(threads, "free_cores", lambda: (2, 2, "0 busy"))
    assert threads.resolve_threads("auto") == 1            # read once a process: a nested command shares it


def test_an_explicit_count_is_kept_and_warned_of_once_when_cores_are_busy(monkeypatch):
    machine(monkeypatch, 2, 1)
    with pytest.warns(UserWarning, match=r"threads=2 but 1 of 2 cores are idle \(1 busy\).*threads=auto"):
        assert threads.resolve_threads(2) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # checked once: later the load is partly ours
        assert threads.resolve_threads(2) == 2
    machine(monkeypatch, 2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert threads.resolve_threads(2) == 2 and threads.resolve_threads(1) == 1


@pytest.mark.parametrize("value", ["many", 0, 1.5, True, -2])
def test_a_bad_count_is_refused(value):
    with pytest.raises(Exception, match=r"option 'threads': expected a positive whole number or auto"):
        threads.resolve_threads(value)



class Parsed(Exception):
    """Stops a script's ``main`` once its options are parsed, carrying them."""


@pytest.mark.parametrize("script", ["eval.bandit_example", "eval.horizon_stability", "eval.manipulation_loop"])
def test_the_scripts_take_threads_auto_by_default_and_refuse_a_bad_count(script, monkeypatch, capsys):
    import argparse
    import importlib

    def parse_then_stop(self, argv=None):
        raise Parsed(self.parse_known_args(argv)[0])

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    main = importlib.import_module(script).main
    for argv, expected in (([], "auto"), (["--threads", "3"], 3), (["--threads", "auto"], "auto")):
        with pytest.raises(Parsed) as parsed:
            main(argv)
        assert parsed.value.args[0].threads == expected
    with pytest.raises(SystemExit) as exit:
        main(["--threads", "0"])
    assert exit.value.code == 2
    assert "argument --threads: expected a positive whole number or auto, got '0'" in capsys.readouterr().err
