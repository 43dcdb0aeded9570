"""The Python package against the repository's examples: sync, check, run, emit, errors.

Run with ``pytest python/tests`` after ``pip install .`` (scripts/test.sh does both)."""

from pathlib import Path

import pytest

import smemsync

ROOT = Path(__file__).resolve().parents[2]
TRANSPOSE = (ROOT / "examples" / "transpose.kir").read_text()


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the first line of ``text`` containing ``needle``."""
    return next(i for i, l in enumerate(text.splitlines(), 1) if needle in l)


def test_sync_inserts_one_barrier_between_the_store_and_the_transposed_load():
    r = smemsync.sync(TRANSPOSE, target="gfx942")
    assert isinstance(r, smemsync.SyncResult)
    assert 'target "gfx942"' in r.text
    lines = r.text.splitlines()
    at = lines.index("  barrier")
    assert lines[at - 1].strip().startswith("store @tile")
    assert lines[at + 1].strip().startswith("%y = load @tile")
    [b] = r.inserted
    assert (b.kind, b.op) == ("barrier", "barrier")
    assert b.line == line_of(TRANSPOSE, "%y = load @tile")
    [h] = b.hazards
    assert (h.kind, h.buffer) == ("RAW", "@tile")
    assert h.source_line == line_of(TRANSPOSE, "store @tile")
    assert h.destination_line == line_of(TRANSPOSE, "%y = load @tile")
    assert h.carried_by is None and "same iteration" in h.description
    assert r.stats.barriers_written == 1 and r.stats.hazards >= 1
    assert r.stats.inserted_syncs == 1 and r.warnings == []


def test_str_of_a_sync_result_is_the_text_with_the_explanation_as_comments():
    r = smemsync.sync(TRANSPOSE, target="gfx942")
    s = str(r)
    assert s.startswith(r.text.rstrip("\n"))
    assert "// @transpose sync #0: barrier before `%y = load @tile[%tx, %ty]`" in s
    assert "//   RAW @tile" in s
    assert smemsync.check(s).race_free  # the comments keep it a kernel file


def test_without_explain_the_hazards_are_left_out():
    r = smemsync.sync(TRANSPOSE, target="gfx942", explain=False)
    assert [s.kind for s in r.inserted] == ["barrier"]
    assert r.inserted[0].hazards == []


def test_check_finds_the_race_and_names_both_accesses():
    v = smemsync.check(TRANSPOSE, target="gfx942")
    assert not v.race_free
    [k] = v.kernels
    assert k.outcome == "race" and k.kernel == "transpose"
    w = v.witness
    assert w is k.witness and w.buffer == "tile" and len(w.index) == 2
    kinds = {w.first.kind, w.second.kind}
    assert "Write" in kinds and "Read" in kinds
    assert w.first.thread != w.second.thread
    lines = {w.first.location[0], w.second.location[0]}
    assert lines == {line_of(TRANSPOSE, "store @tile"), line_of(TRANSPOSE, "%y = load @tile")}
    assert k.diagnostic is not None and k.diagnostic.code == "C0001"
    assert len(k.diagnostic.labels) == 2


def test_the_synchronized_kernel_checks_race_free_with_its_declared_target():
    synced = smemsync.sync(TRANSPOSE, target="gfx942").text
    v = smemsync.check(synced)  # the header says gfx942
    assert v.race_free and v.witness is None
    assert v.kernels[0].outcome in ("proved", "checked")
    assert str(v).startswith("@transpose: race-free")


def test_run_transposes_the_matrix():
    synced = smemsync.sync(TRANSPOSE, target="gfx942").text
    out = smemsync.run(synced, seed=3)["transpose"]
    a, b = out["in"], out["out"]
    assert a.shape == [64, 64] and b.shape == [64, 64] and a.element == "f32"
    assert any(x != 0 for x in a.data)
    for i in range(64):
        for j in range(64):
            assert b.data[i * 64 + j] == a.data[j * 64 + i]


def test_run_refuses_the_unsynchronized_kernel():
    with pytest.raises(smemsync.SmemsyncError) as e:
        smemsync.run(TRANSPOSE, target="gfx942")
    assert e.value.exit_code in (1, 2) and e.value.diagnostics
    assert e.value.diagnostics[0].code in ("C0006", "C0001")


def test_a_malformed_kernel_raises_with_line_and_column():
    src = "kernel @k(%o: global f32[4]) block(4) {\n  %t = tid.x\n  %x = frobnicate %t\n}\n"
    with pytest.raises(smemsync.SmemsyncError) as e:
        smemsync.sync(src, target="gfx942", file_name="bad.kir")
    err = e.value
    assert (err.kind, err.exit_code) == ("input", 2)
    [d] = err.diagnostics
    assert d.severity == "error" and d.code.startswith("E")
    assert (d.line, d.column) == (3, 8)
    assert "frobnicate" in d.message
    assert "bad.kir:3:8" in str(err) and "bad.kir:3:8" in d.rendered


def test_an_unknown_target_lists_the_known_ones():
    with pytest.raises(smemsync.SmemsyncError) as e:
        smemsync.sync(TRANSPOSE, target="gfx999")
    [d] = e.value.diagnostics
    assert d.code == "E0200" and d.location is None
    assert any("gfx942" in n for n in d.notes)
    assert e.value.exit_code == 2


def test_a_target_that_contradicts_the_declared_one_is_refused():
    synced = smemsync.sync(TRANSPOSE, target="gfx942").text
    with pytest.raises(smemsync.SmemsyncError) as e:
        smemsync.check(synced, target="sm_90")
    [d] = e.value.diagnostics
    assert d.code == "E0171" and d.line == 1


DIVERGENT = (
    "kernel @divergent(%n: i32) block(128) {\n"
    "  shared @s : i32[128]\n"
    "  %t = tid.x\n"
    "  %u = sub 63, %t\n"
    "  %lo = cmp lt %t, 48\n"
    "  if %lo {\n"
    "    store @s[%t], 1\n"
    "    %x = load @s[%u]\n"
    "  }\n"
    "}\n"
)


def test_a_divergent_hazard_is_placed_by_splitting_its_branch():
    # tests/filetests/placement/divergent-hazard-is-split-not-hoisted.kir: both accesses under
    # a thread-dependent `if` inside one wavefront; the branch is split so that a warp sync
    # sits between its halves.
    r = smemsync.sync(DIVERGENT, target="gfx942")
    [w] = r.warnings
    assert w.code == "W0340" and (w.line, w.column) == (6, 3)
    assert r.text.count("if %lo") == 2 and r.stats.warp_syncs_written == 1


def test_a_hazard_no_barrier_can_fix_is_a_finding():
    # The same accesses in a loop inside the arm: no split can put a barrier between them.
    kernel = DIVERGENT.replace(
        "    store @s[%t], 1\n    %x = load @s[%u]\n",
        "    for %i = 0 to 4 step 1 {\n      store @s[%t], %i\n      %x = load @s[%u]\n    }\n",
    )
    with pytest.raises(smemsync.SmemsyncError) as e:
        smemsync.sync(kernel, target="gfx942")
    assert (e.value.kind, e.value.exit_code) == ("finding", 1)
    raw, war = e.value.diagnostics
    assert (raw.code, raw.line, raw.column) == ("E0303", 9, 7)
    assert [l.location for l in raw.labels] == [(9, 7), (8, 7)]
    assert [l.primary for l in raw.labels] == [True, False]
    assert (war.code, war.line, war.column) == ("E0303", 8, 7)


def test_emit_writes_mlir_and_cuda():
    synced = smemsync.sync(TRANSPOSE, target="sm_90").text
    cuda = smemsync.emit(synced, "cuda", target="sm_90")
    assert "__global__" in cuda and "__syncthreads()" in cuda
    mlir = smemsync.emit(synced, "mlir", target="sm_90")
    assert "gpu.func @transpose" in mlir and "nvvm.barrier0" in mlir
    again = smemsync.sync(mlir, target="sm_90", language="mlir")
    assert again.stats.barriers_written == 0 and again.stats.existing_barriers == 1


def test_emit_of_one_kernel_of_several_names_it():
    two = TRANSPOSE + TRANSPOSE.replace("@transpose", "@other")
    with pytest.raises(smemsync.SmemsyncError) as e:
        smemsync.emit(two, "cuda", target="sm_90", kernel="missing")
    assert e.value.diagnostics[0].code == "E0172"


def test_argument_errors_are_value_errors():
    with pytest.raises(ValueError):
        smemsync.sync(TRANSPOSE, target="gfx942", strategy="fastest")
    with pytest.raises(ValueError):
        smemsync.check(TRANSPOSE, block=(1, 2, 3, 4))
    with pytest.raises(ValueError):
        smemsync.sync(TRANSPOSE, target="gfx942", language="ttgir")


def test_targets_and_version():
    assert {"gfx942", "gfx1201", "sm_80", "sm_90"} <= set(smemsync.targets())
    assert smemsync.__version__ == "0.1.0"


def target_for(src: str) -> str:
    """The target an example needs (as tests/check_examples.rs decides it)."""
    if "tdm_load" in src:
        return "gfx1250"
    if "gather_to_lds" in src:
        return "gfx942"
    if any(s in src for s in ("cp_async", "tma_", "mbar_", "named_", "wgmma")):
        return "sm_90"
    return "gfx942"


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.kir")), ids=lambda p: p.name)
def test_every_example_synchronizes_and_then_checks_race_free(path):
    text = path.read_text()
    r = smemsync.sync(text, target=target_for(text), file_name=path.name)
    assert len(r.kernels) == text.count("kernel @")
    assert smemsync.check(r.text, schedules=1).race_free, path.name


SOFTMAX_TTGIR = (ROOT / "corpus" / "triton" / "softmax.ttgir").read_text()


def test_import_ttgir_reads_a_triton_kernel_that_then_synchronizes_and_checks():
    imp = smemsync.import_ttgir(SOFTMAX_TTGIR, file_name="softmax.ttgir")
    assert imp.target == "sm_90"
    assert "kernel @" in imp.kir
    # The corpus TTGIR carries no allocation offsets: the importer says it placed the buffers.
    assert any(w.code == "W1102" and w.location is not None for w in imp.warnings)
    result = smemsync.sync(imp.kir, imp.target)
    assert any(b.kind == "barrier" for b in result.inserted), "cross-warp reductions need one"
    verdict = smemsync.check(result.text, block=128, bounds={"stride": 256, "n": 256})
    assert verdict.race_free and verdict.witness is None


def test_import_ttgir_locates_malformed_input():
    # A result list without `=`, on the third line of the function.
    at = SOFTMAX_TTGIR.index("tt.func public")
    line = SOFTMAX_TTGIR.count("\n", 0, at) + 2
    lines = SOFTMAX_TTGIR.splitlines()
    lines.insert(line - 1, "    %y %z ttg.local_load %x")
    with pytest.raises(smemsync.SmemsyncError) as e:
        smemsync.import_ttgir("\n".join(lines), file_name="bad.ttgir")
    assert e.value.kind == "input" and e.value.exit_code == 2
    [d] = e.value.diagnostics
    assert d.code == "E1102" and d.location is not None and d.location[0] == line
    assert "bad.ttgir" in d.rendered
