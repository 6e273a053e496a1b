"""scripts/launch_lead_probe.py times bare kernels that differ in one launch property each. On the CPU: each
variant's source carries just its property, and the ctypes layouts match the driver's CUlaunchConfig and
CUlaunchAttribute (a wrong offset would launch a different grid, or none). The GPU run's figures are in
BENCHMARKS.md."""

from __future__ import annotations

import ctypes

from script_module import script


def probe():
    return script("launch_lead_probe")


def test_each_variant_differs_from_the_gemm_like_one_in_one_property():
    p = probe()
    base = p.VARIANTS["gemm-like"]
    for name, props in p.VARIANTS.items():
        if not name.startswith("tiny") and name != "gemm-like":
            assert sum(a != b for a, b in zip(props, base)) == 1, name


def test_the_source_carries_the_variants_properties():
    p = probe()
    plain = p.source(512, 384, 1, False)
    assert "unsigned char bytes[512]" in plain and "__launch_bounds__(384, 1)" in plain
    assert "#if 0" in plain and "__cluster_dims__" not in plain
    assert "#if 1\n    asm volatile(\"griddepcontrol.wait;\"" in p.source(16, 128, 1, True)
    assert "__cluster_dims__(2, 1, 1)" in p.source(512, 384, 2, False)


def test_the_launch_structs_match_the_drivers_layout():
    p = probe()
    # CUlaunchAttribute: a 4-byte id, 4 bytes of padding, a 64-byte union
    assert ctypes.sizeof(p.LaunchAttribute) == 72 and p.LaunchAttribute.value.offset == 8
    # CUlaunchConfig: seven unsigned ints, then the stream at 32, the attributes at 40 and their count at 48
    assert p.LaunchConfig.stream.offset == 32 and p.LaunchConfig.attrs.offset == 40
    assert p.LaunchConfig.num_attrs.offset == 48 and ctypes.sizeof(p.LaunchConfig) == 56


def test_the_pdl_launch_takes_avos_launch_grid_block_and_shared_memory():
    from avo.cuda_launch import Launch

    p = probe()
    launch = Launch(0, 0, (128,), (384,), 200 * 1024, [(bytes(16), 64), (bytes(8), 8)], "probe")
    attribute = p.LaunchAttribute(p.PROGRAMMATIC_STREAM_SERIALIZATION, b"", (1).to_bytes(4, "little"))
    config = p.pdl_config(launch, 0x1234, attribute)
    assert (config.grid_x, config.grid_y, config.grid_z, config.block_x, config.block_y, config.block_z) == \
        (128, 1, 1, 384, 1, 1)
    assert (config.shared_mem, config.stream, config.num_attrs) == (200 * 1024, 0x1234, 1)
    assert config.attrs.contents.id == 6
