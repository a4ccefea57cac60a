"""Shared settings: the configuration schema is the pipeline's single source of defaults, and it
agrees with the package's; every experiment has its tiny configuration."""

import dataclasses

import numpy as np
import pytest
import yaml
from workflow_runner import REPO, TEST_CONFIGS, tiny_config

import diversity_core as dc
from diversity_core import MagnitudeSettings

SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())


def test_schema_magnitude_defaults_are_the_package_defaults():
    schema = SCHEMA["properties"]["magnitude"]["properties"]
    package = MagnitudeSettings().as_dict()
    assert set(schema) == set(package)
    defaults = {key: spec["default"] for key, spec in schema.items()}
    # The device as the schema writes it (a name) and as the settings carry it (a Device).
    assert defaults == package | {"device": package["device"].name}
    assert MagnitudeSettings.from_config(defaults) == MagnitudeSettings()


def test_default_config_spells_out_the_magnitude_defaults():
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    spelt = MagnitudeSettings.from_config(config["magnitude"])
    # config.yaml keeps the name it always had, auto (its provenance records hold it): the
    # engine's default's engine, the NumPy one, so that its tables stay what they are.
    assert spelt.device.name == "auto" and spelt.device.engine == MagnitudeSettings().device.engine
    assert dataclasses.replace(spelt, device="cpu") == MagnitudeSettings()


def test_from_config_rejects_unknown_and_invalid_keys():
    with pytest.raises(ValueError, match=r"unknown magnitude settings \['rtol'\]"):
        MagnitudeSettings.from_config({"rtol": 1e-8})
    with pytest.raises(ValueError, match="magnitude.target"):
        MagnitudeSettings.from_config({"target": 1.0})
    with pytest.raises(ValueError, match="magnitude.integration must be"):
        MagnitudeSettings(integration="simpson")
    with pytest.raises(ValueError, match="magnitude.n_ts"):
        MagnitudeSettings(n_ts=1)


def test_settings_apply_their_conventions():
    X = np.random.default_rng(0).normal(size=(40, 3))
    space = dc.MagnitudeSpace(dc.pairwise_distances(X))
    settings = MagnitudeSettings(target=0.8, integration="trapezoid", n_ts=12)
    t = settings.convergence_scale(space)
    assert t == pytest.approx(dc.convergence_scale(space, 0.8), rel=1e-12)
    assert settings.mag_area(space, t) == dc.mag_area(space, t, method="trapezoid", n_ts=12)
    assert settings.reference_free_t_cut(convergence_scales=[1.0, 3.0, 2.0]) == 2.0
    assert dataclasses.replace(settings, target=0.95).target == 0.95


def test_every_experiment_has_a_tiny_configuration():
    experiments = SCHEMA["properties"]["experiments"]["items"]["enum"]
    for experiment in experiments:
        config = yaml.safe_load(tiny_config(experiment).read_text())
        assert config["experiments"] == [experiment]
    assert {p.stem for p in TEST_CONFIGS.glob("config_*.yaml")} == {
        f"config_{e}" for e in experiments}


def test_the_magnitude_section_is_checked_before_any_job():
    from diversity_core.device import device_problem
    from diversity_core.magnitude.settings import config_problems

    # The device by name only (common.smk, every section's device): the job's node may have
    # the GPU the submitting machine lacks.
    assert device_problem("cuda:1", "magnitude.device") is None
    assert device_problem("torch:cpu", "magnitude.device") is None
    assert device_problem("gpu", "images.device").startswith(
        "images.device: unknown device 'gpu'; the devices are cpu, auto, cuda, cuda:N, torch:cpu")
    assert config_problems({"device": "cuda:1", "n_ts": 40}) == []
    [problem] = config_problems({"target": 1.5, "device": "gpu"})  # the device: not twice
    assert "magnitude.target" in problem
