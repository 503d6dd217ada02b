import estimator


def test_notebook_api_matches_the_cli_path():
    cfg = estimator.resolve_config(["fabric=ideal", "fabric.nodes=64"])
    assert cfg["fabric"]["nodes"] == 64
    fabric = estimator.make_fabric(cfg["fabric"])
    cost = fabric.collective_cost("all_reduce", 64 * 2**20, "ring")
    n, a, b, m = 64, cfg["fabric"]["alpha_s"], cfg["fabric"]["bandwidth_Bps"], 64 * 2**20
    assert cost.time_s == 2 * (n - 1) * a + 2 * (n - 1) / n * m / b
    from estimator.estimate import estimate

    first = estimate(estimator.resolve_config(["fabric.nodes=16"]))
    again = estimate(estimator.resolve_config(["fabric.nodes=16"]))
    assert first.metrics == again.metrics and first.metrics["iter_time_s"] > 0


def test_resolve_config_survives_the_config_module_being_imported():
    import estimator.config  # noqa: F401  (binds the submodule on the package)

    assert estimator.resolve_config(["device=h100"])["device"]["name"] == "h100"
    assert estimator.resolve_config([])["device"]["name"] == "a100"
