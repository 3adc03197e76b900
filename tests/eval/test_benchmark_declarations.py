"""What a benchmark declares about its envs: the RAM one holds (LIBERO: ~1.9 GB), so more workers than the
machine's available RAM holds are refused before anything runs; the packages its results depend on, whose versions
are part of the run's digest."""

from __future__ import annotations

import pytest

from hylo.envs.babyai import BabyAIBenchmark
from hylo.eval.resolve import EvalError, available_ram_gb, check_memory
from hylo.eval.runner import Evaluation
from hylo.eval.spec import EvalSpec


def spec(workers: int, tmp_path, **more) -> EvalSpec:
    return EvalSpec(benchmark="babyai", tasks=["GoToLocal"], agent="expert", episodes=2, workers=workers,
                    log_dir=str(tmp_path), **more)  # fmt: skip


def test_workers_beyond_the_ram_are_refused_naming_the_figures(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(BabyAIBenchmark, "env_ram_gb", 1.9)
    bench = BabyAIBenchmark()
    check_memory(spec(2, tmp_path), bench, available_gb=4.0)  # 3.8 GB of 4: fits
    with pytest.raises(EvalError, match=r"--workers 2 needs about 3\.8 GB for 2 babyai envs \(1\.9 GB each\), and "
                       r"this machine has 3\.5 GB available; use --workers 1 or fewer") as refused:  # fmt: skip
        check_memory(spec(2, tmp_path), bench, available_gb=3.5)
    assert refused.value.field == "workers"
    with pytest.raises(EvalError, match="a machine with more memory"):
        check_memory(spec(1, tmp_path), bench, available_gb=1.0)
    check_memory(spec(2, tmp_path, backend="ray"), bench, available_gb=1.0)  # Ray places by the cluster's memory


def test_a_run_that_cannot_fit_stops_before_its_log_is_made(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(BabyAIBenchmark, "env_ram_gb", 2 * available_ram_gb())
    with pytest.raises(EvalError, match=r"--workers 1 needs about"):
        Evaluation(spec(1, tmp_path))
    assert not any(tmp_path.iterdir())
    monkeypatch.setattr(BabyAIBenchmark, "env_ram_gb", None)  # a benchmark that declares nothing is not counted
    assert Evaluation(spec(1, tmp_path)).run().summary.n == 2


def test_the_versions_a_benchmarks_results_depend_on_are_part_of_the_runs_digest(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = Evaluation(spec(1, tmp_path))
    assert plain.resolved.versions == {}  # a benchmark that names no package: run ids as they always were
    assert plain.config_digest == plain.spec.digest(plain.resolved.budgets)
    assert plain.digest == plain.spec.digest(plain.resolved.budgets, code=plain.code.digest)
    monkeypatch.setattr(BabyAIBenchmark, "result_packages", ("minigrid", "not-a-package"))
    pinned = Evaluation(spec(1, tmp_path))
    assert pinned.resolved.versions["not-a-package"] is None and pinned.resolved.versions["minigrid"]
    assert pinned.digest != plain.digest and pinned.run_id != plain.run_id
    monkeypatch.setattr("hylo.eval.resolve.package_versions_of", lambda names: dict.fromkeys(names, "0.0.1"))
    upgraded = Evaluation(spec(1, tmp_path))
    assert upgraded.run_id not in (plain.run_id, pinned.run_id)  # resumed on other versions: another run
