"""Multi-tenant allocation: Lumorph (any size) vs fixed-shape slicing (seed 000, Sec. 3)."""

import subprocess
import sys

import pytest

from estimator.allocation import (
    BCubeGroupPolicy,
    LumorphPolicy,
    TorusSlicePolicy,
    generate_requests,
    make_policy,
    simulate,
)
from estimator.allocation.requests import Request, fixed_requests
from estimator.errors import EstimatorError

# 64 GPUs exactly filled by tenants of non-cuboid, non-power-of-two sizes (cf. seed 000 Fig. 2a)
MIX = [24, 20, 6, 10, 4]


def test_lumorph_places_every_request_of_a_mix_that_fixed_shapes_strand():
    lum = simulate(make_policy("lumorph", 64), fixed_requests(MIX))
    assert lum.placed == len(MIX) and lum.rejected == 0 and lum.stranded_gpu_s == 0
    for name in ("torus_slices", "bcube_groups"):
        rep = simulate(make_policy(name, 64), fixed_requests(MIX))
        print(f"{name}: placed {rep.placed}/{len(MIX)}, stranded GPU-s {rep.stranded_gpu_s:.3g}")
        assert rep.rejected >= 1
        assert rep.stranded_gpu_s > 0  # rounded-up shapes hold GPUs nobody asked for
        assert rep.utilisation < lum.utilisation


def test_fragmented_rejection_counted_when_free_gpus_are_not_a_shape():
    # SiPAC/BCube r=2, 8 CUs: groups are aligned blocks of 1, 2, 4, 8 CUs
    pol = BCubeGroupPolicy(2, 2)
    assert pol.place(1) == (0,) and pol.place(1) == (1,) and pol.place(4) == (4, 5, 6, 7)
    assert pol.place(2) == (2, 3)
    pol.release((0,))
    pol.release((2, 3))
    assert pol.free_count() == 3 and pol.place(3) is None  # 3 free CUs, no free aligned block of 4
    # the simulator calls that rejection fragmented: 4 CUs; CU0 and CU2 held, CU1 and CU3 free
    stream = [Request(0, 1, 0.0, 10.0), Request(1, 1, 1.0, 1.0), Request(2, 1, 1.5, 10.0), Request(3, 2, 3.0, 1.0)]
    rep = simulate(BCubeGroupPolicy(2, 1), stream)
    assert rep.rejected_fragmented == 1 and rep.rejected_ids == [3]
    rep = simulate(LumorphPolicy(1, 4), stream)
    assert rep.rejected == 0


def test_torus_slices_are_smallest_power_of_two_cuboids():
    pol = TorusSlicePolicy((4, 4, 4))
    assert pol.allocation_size(6) == 8 and pol.shapes(6)[0] == (2, 2, 2)
    assert pol.allocation_size(20) == 32
    assert pol.allocation_size(65) is None
    assert len(pol.place(6)) == 8 and pol.free_count() == 56


def test_lumorph_keeps_a_tenant_on_one_server_when_it_fits():
    pol = LumorphPolicy(servers=4, tiles=32)
    first = pol.place(20)
    second = pol.place(10)
    assert {g // 32 for g in first} == {0}
    assert {g // 32 for g in second} == {0}  # best fit: the fullest server that still fits
    big = pol.place(40)
    assert len(big) == 40 and len({g // 32 for g in big}) == 2


def test_seeded_stream_is_reproducible_and_lumorph_never_fragments():
    a = generate_requests(300, seed=7, max_size=32, mean_interarrival_s=1.0, mean_duration_s=12.0)
    assert a == generate_requests(300, seed=7, max_size=32, mean_interarrival_s=1.0, mean_duration_s=12.0)
    assert a != generate_requests(300, seed=8, max_size=32, mean_interarrival_s=1.0, mean_duration_s=12.0)
    reps = {p: simulate(make_policy(p, 256), a) for p in ("lumorph", "torus_slices", "bcube_groups")}
    for name, rep in reps.items():
        print(f"{name}: placed {rep.placed}/300 util {rep.utilisation:.3f} fragmented {rep.rejected_fragmented}")
    assert reps["lumorph"].rejected_fragmented == 0 and reps["lumorph"].overallocated == 0
    for p in ("torus_slices", "bcube_groups"):
        assert reps[p].placed < reps["lumorph"].placed
        assert reps[p].utilisation < reps["lumorph"].utilisation
        assert reps[p].rejected_fragmented > 0


@pytest.mark.parametrize(
    "call",
    [
        lambda: make_policy("bcube_groups", 96, r=2),
        lambda: make_policy("torus_slices", 96),
        lambda: make_policy("lumorph", 40),
        lambda: make_policy("nope", 64),
        lambda: LumorphPolicy(2, 33),
        lambda: generate_requests(5, sizes=[0, 3]),
    ],
)
def test_bad_inputs_are_one_line_errors(call):
    with pytest.raises(EstimatorError) as exc:
        call()
    assert "\n" not in str(exc.value)


def test_allocate_command_prints_one_row_per_policy(capsys):
    from estimator.cli import run

    assert run(["allocate", "allocation.gpus=64", "allocation.requests=100", "allocation.seed=3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[1:]] == ["lumorph", "torus_slices", "bcube_groups"]
    assert out[1].split()[4] == "0"  # Lumorph: no fragmented rejections
    with pytest.raises(EstimatorError, match="unknown parameter"):
        run(["allocate", "allocation.nope=1"])


@pytest.mark.parametrize("value", ["0", "-3", "2000000"])
def test_a_request_count_outside_its_range_is_one_line_exit_2(value):
    """``allocation.requests=0`` printed an all-zero table (exit 0); a count outside 1..limits.alloc_requests is refused."""
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "allocate", f"allocation.requests={value}",
                          "allocation.gpus=64"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "allocation.requests" in out.stderr
    assert "1..1000000" in out.stderr or "exceeds the limit of 1000000" in out.stderr
