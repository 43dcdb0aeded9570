"""smemsync: automatic, minimal and provably correct GPU shared-memory synchronization.

Give it a GPU kernel as text (smemsync's own ``.kir`` format, or the MLIR subset it writes)
and a target; it finds every shared-memory hazard, inserts the fewest and cheapest syncs that
remove them, and proves the result race-free with an independent checker::

    import smemsync
    result = smemsync.sync(open("examples/transpose.kir").read(), target="gfx942")
    print(result.text)               # the kernel with its barrier
    for s in result.inserted:        # what was inserted, where, and why
        print(s.kind, s.at, [h.description for h in s.hazards])
    verdict = smemsync.check(result.text, target="gfx942")
    assert verdict.race_free

Every failure raises :class:`SmemsyncError`, whose ``diagnostics`` carry codes, messages,
lines and columns. The package is a thin layer over smemsync's Rust library (its public API,
docs/library.md); the Rust extension is ``smemsync._smemsync``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _smemsync

__all__ = [
    "Access",
    "Buffer",
    "Diagnostic",
    "Hazard",
    "ImportedTtgir",
    "InsertedSync",
    "KernelSync",
    "KernelVerdict",
    "Label",
    "SmemsyncError",
    "SyncResult",
    "SyncStats",
    "Verdict",
    "Witness",
    "check",
    "emit",
    "import_ttgir",
    "run",
    "sync",
    "targets",
]

__version__ = "0.1.0"

Location = Tuple[int, int]
"""A 1-based (line, column) in the source; columns count characters."""


@dataclass(frozen=True)
class Label:
    """A message attached to a place in the source."""

    location: Optional[Location]
    message: str
    primary: bool


@dataclass(frozen=True)
class Diagnostic:
    """One error, warning or note, with a stable code (``E…`` input, ``V…`` verifier,
    ``C…`` checker, ``W…`` warnings) and the place in the source it is about."""

    severity: str
    code: str
    message: str
    location: Optional[Location]
    labels: List[Label]
    notes: List[str]
    help: Optional[str]
    rendered: str
    """The diagnostic as the CLI prints it: message, source lines with labels, notes, help."""

    @property
    def line(self) -> Optional[int]:
        """The 1-based line of the primary label (``None`` when it has no place)."""
        return self.location[0] if self.location else None

    @property
    def column(self) -> Optional[int]:
        """The 1-based column of the primary label (``None`` when it has no place)."""
        return self.location[1] if self.location else None

    @classmethod
    def _from(cls, d: dict) -> "Diagnostic":
        labels = [Label(**x) for x in d["labels"]]
        return cls(**{**d, "labels": labels})

    def __str__(self) -> str:
        return self.rendered


class SmemsyncError(Exception):
    """A failure of smemsync: bad input (``kind == "input"``), a finding that stops the
    operation (``"finding"``: e.g. a hazard no sync can remove, a race in :func:`run`), or a bug
    in smemsync (``"internal"``). ``exit_code`` is what the CLI exits with for the same failure
    (2, 1, 3). ``str(error)`` is the diagnostics rendered against the source."""

    def __init__(self, kind: str, exit_code: int, message: str, rendered: str,
                 diagnostics: List[Diagnostic]) -> None:
        super().__init__(rendered)
        self.kind = kind
        self.exit_code = exit_code
        self.message = message
        self.rendered = rendered
        self.diagnostics = diagnostics

    @classmethod
    def _from(cls, failure: "_smemsync.Failure") -> "SmemsyncError":
        p = failure.args[0]
        diags = [Diagnostic._from(d) for d in p["diagnostics"]]
        return cls(p["kind"], p["exit_code"], p["message"], p["rendered"], diags)


@dataclass(frozen=True)
class Hazard:
    """Two accesses to a shared buffer that a sync must order."""

    kind: str
    """``RAW``, ``WAR``, ``WAW`` or ``ATOMIC``."""
    buffer: str
    source: str
    """The earlier access as written, with its line."""
    destination: str
    """The later access as written, with its line."""
    source_line: Optional[int]
    destination_line: Optional[int]
    carried_by: Optional[Tuple[str, int]]
    """For a loop-carried hazard: the loop and the least iteration distance."""
    description: str
    """The hazard in one line, as ``smemsync sync --explain`` prints it."""


@dataclass(frozen=True)
class InsertedSync:
    """One sync op smemsync inserted."""

    kind: str
    """``"barrier"``, ``"warp_sync"``, ``"wait"`` or ``"proxy_fence"`` (sm_90)."""
    op: str
    """The op as the text form writes it."""
    at: str
    """Where it goes, named as the source reads ("before `%y = load …` (line 16)")."""
    line: Optional[int]
    hazards: List[Hazard]
    """The hazards it removes (barriers and warp syncs; empty without ``explain``)."""
    reason: Optional[str]
    """Why a wait is needed (waits; ``None`` without ``explain``)."""


@dataclass(frozen=True)
class SyncStats:
    """Counts of a synchronization (totals over kernels when summed)."""

    hazards: int = 0
    covered_by_existing: int = 0
    barriers_written: int = 0
    warp_syncs_written: int = 0
    existing_barriers: int = 0
    barriers_executed: int = 0
    inserted_executed: int = 0
    lower_bound: int = 0
    waits_written: int = 0
    inserted_syncs: int = 0
    conservative: int = 0

    def __add__(self, other: "SyncStats") -> "SyncStats":
        names = self.__dataclass_fields__
        return SyncStats(**{n: getattr(self, n) + getattr(other, n) for n in names})


@dataclass(frozen=True)
class KernelSync:
    """What synchronization did to one kernel."""

    name: str
    inserted: List[InsertedSync]
    covered_by_existing: List[Hazard]
    """Hazards the input's own syncs already remove (with ``explain``)."""
    stats: SyncStats
    warnings: List[Diagnostic]

    @classmethod
    def _from(cls, d: dict) -> "KernelSync":
        def hazards(xs: list) -> List[Hazard]:
            return [Hazard(**h) for h in xs]

        inserted = [InsertedSync(**{**s, "hazards": hazards(s["hazards"])}) for s in d["inserted"]]
        return cls(
            name=d["name"],
            inserted=inserted,
            covered_by_existing=hazards(d["covered_by_existing"]),
            stats=SyncStats(**d["stats"]),
            warnings=[Diagnostic._from(w) for w in d["warnings"]],
        )


@dataclass(frozen=True)
class SyncResult:
    """What :func:`sync` returns: the synchronized text and, per kernel, what was done."""

    text: str
    """The synchronized kernels in the text form (each header names the target)."""
    kernels: List[KernelSync]

    @property
    def inserted(self) -> List[InsertedSync]:
        """Every inserted sync, kernel by kernel."""
        return [s for k in self.kernels for s in k.inserted]

    @property
    def warnings(self) -> List[Diagnostic]:
        """Every warning, kernel by kernel."""
        return [w for k in self.kernels for w in k.warnings]

    @property
    def stats(self) -> SyncStats:
        """The counts, summed over the kernels."""
        total = SyncStats()
        for k in self.kernels:
            total = total + k.stats
        return total

    def __str__(self) -> str:
        """The text followed by ``//`` comments saying what was inserted and why (it still
        parses as a kernel file)."""
        lines = [self.text.rstrip("\n")]
        for k in self.kernels:
            for i, s in enumerate(k.inserted):
                lines.append(f"// @{k.name} sync #{i}: {s.op} {s.at}")
                lines.extend(f"//   {h.description}" for h in s.hazards)
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Access:
    """One of a race's two accesses."""

    op: str
    location: Optional[Location]
    kind: str
    """``Read``, ``Write``, ``Atomic``, ``AsyncWrite`` or ``AsyncRead``."""
    thread: int
    thread_xyz: Tuple[int, int, int]
    by_copy_engine: bool
    iteration: List[Tuple[str, int]]
    """The enclosing loops' induction variables, outermost first."""


@dataclass(frozen=True)
class Witness:
    """A race: two unordered accesses to one shared element, at least one writing."""

    buffer: str
    index: List[int]
    block: Tuple[int, int, int]
    first: Access
    second: Access

    @classmethod
    def _from(cls, d: dict) -> "Witness":
        return cls(**{**d, "first": Access(**d["first"]), "second": Access(**d["second"])})


@dataclass(frozen=True)
class KernelVerdict:
    """The checker's answer for one kernel."""

    kernel: str
    outcome: str
    """``proved``, ``checked`` (no race found by interpretation), ``race``, ``deadlock`` or
    ``execution_error``."""
    summary: str
    block: Optional[Tuple[int, int, int]]
    detail: Optional[str]
    """For ``proved``, the argument; for ``checked``, why the proof did not apply."""
    witness: Optional[Witness]
    diagnostic: Optional[Diagnostic]
    """A finding as a diagnostic (for a race: both accesses labelled)."""

    @property
    def race_free(self) -> bool:
        """Proved or checked race-free."""
        return self.outcome in ("proved", "checked")

    @classmethod
    def _from(cls, d: dict) -> "KernelVerdict":
        w = Witness._from(d["witness"]) if d["witness"] else None
        diag = Diagnostic._from(d["diagnostic"]) if d["diagnostic"] else None
        return cls(**{**d, "witness": w, "diagnostic": diag})


@dataclass(frozen=True)
class Verdict:
    """What :func:`check` returns: one :class:`KernelVerdict` per kernel."""

    kernels: List[KernelVerdict] = field(default_factory=list)

    @property
    def race_free(self) -> bool:
        """Every kernel proved or checked race-free."""
        return all(k.race_free for k in self.kernels)

    @property
    def witness(self) -> Optional[Witness]:
        """The first race's witness, if any kernel has one."""
        return next((k.witness for k in self.kernels if k.witness), None)

    def __str__(self) -> str:
        return "\n".join(f"@{k.kernel}: {k.summary}" for k in self.kernels)


@dataclass(frozen=True)
class Buffer:
    """A global buffer after :func:`run`: element type, shape, row-major values."""

    element: str
    shape: List[int]
    data: List[float]


Block = Union[int, Sequence[int]]


def _block(block: Optional[Block]) -> Optional[Tuple[int, int, int]]:
    if block is None:
        return None
    dims = [block] if isinstance(block, int) else list(block)
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"block must be N or (X, Y[, Z]), not {block!r}")
    dims += [1] * (3 - len(dims))
    return (dims[0], dims[1], dims[2])


def _language(language: str, target: Optional[str]) -> str:
    if language == "ttgir":
        raise ValueError("read TTGIR with import_ttgir(text) and pass its .kir (and .target)")
    if language not in ("kir", "mlir"):
        raise ValueError(f"language must be 'kir' or 'mlir', not {language!r}")
    if language == "mlir" and target is None:
        raise ValueError("reading MLIR needs a target (it says what counter fields mean)")
    return language


def sync(source: str, target: str = "sm_90", explain: bool = True, *,
         strategy: str = "optimal", warp_sync: bool = True,
         bounds: Optional[Mapping[str, int]] = None, language: str = "kir",
         file_name: str = "<input>") -> SyncResult:
    """Insert the fewest syncs that remove every shared-memory hazard of every kernel.

    ``source`` is the kernel text (``language="mlir"`` for smemsync's MLIR subset);
    ``target`` one of :func:`targets`. With ``explain`` each inserted barrier lists the
    hazards it removes and each wait its reason. ``strategy`` is ``"optimal"``, ``"naive"``
    or ``"exhaustive"`` (small kernels); ``bounds`` gives scalar parameters' values for
    counting executed barriers; ``file_name`` names the source in rendered diagnostics.
    Raises :class:`SmemsyncError` (bad input, a hazard no sync can remove)."""
    if strategy not in ("optimal", "naive", "exhaustive"):
        raise ValueError(f"strategy must be optimal, naive or exhaustive, not {strategy!r}")
    try:
        raw = _smemsync.sync(source, target, explain, strategy, warp_sync, dict(bounds or {}),
                             _language(language, target), file_name)
    except _smemsync.Failure as e:
        raise SmemsyncError._from(e) from None
    return SyncResult(text=raw["text"], kernels=[KernelSync._from(k) for k in raw["kernels"]])


def check(source: str, target: Optional[str] = None, *, block: Optional[Block] = None,
          bounds: Optional[Mapping[str, int]] = None, schedules: int = 4, prove: bool = True,
          language: str = "kir", file_name: str = "<input>",
          grid: Optional[Block] = None) -> Verdict:
    """Prove or refute race freedom of every kernel with the independent checker.

    ``target`` defaults to the one the kernels declare (``sync`` writes it), else a generic
    model. A race is an answer, not an error: the verdict's ``witness`` names the two
    accesses, the threads, the element and the iterations. ``block`` overrides the block
    size; ``bounds`` gives scalar parameters' values; ``schedules`` is the number of schedules
    interpretation explores; ``prove=False`` skips the static proof. ``grid`` (``N`` or
    ``(X, Y[, Z])``) is the grid to interpret for kernels that declare none (every block is
    run; without it such a kernel is run as block 0 only); one that contradicts a declared
    ``grid(...)`` raises (E0152).
    Raises :class:`SmemsyncError` for bad input."""
    try:
        raw = _smemsync.check(source, target, _block(block), dict(bounds or {}),
                              max(1, schedules), prove, _language(language, target), file_name,
                              _block(grid))
    except _smemsync.Failure as e:
        raise SmemsyncError._from(e) from None
    return Verdict(kernels=[KernelVerdict._from(v) for v in raw])


def run(source: str, target: Optional[str] = None, *, seed: int = 0,
        block: Optional[Block] = None, bounds: Optional[Mapping[str, int]] = None,
        language: str = "kir", file_name: str = "<input>") -> Dict[str, Dict[str, Buffer]]:
    """Execute every kernel on smemsync's interpreter, with inputs drawn from ``seed``.

    Returns ``{kernel: {buffer: Buffer}}`` for every global buffer. The kernel must be
    race-free: a race, deadlock or execution error raises :class:`SmemsyncError`."""
    try:
        raw = _smemsync.run(source, target, _block(block), dict(bounds or {}), seed,
                            _language(language, target), file_name)
    except _smemsync.Failure as e:
        raise SmemsyncError._from(e) from None
    return {k: {n: Buffer(**b) for n, b in bufs.items()} for k, bufs in raw.items()}


def emit(source: str, format: str = "mlir", target: str = "sm_90", *,
         kernel: Optional[str] = None, language: str = "kir",
         file_name: str = "<input>") -> str:
    """Write the kernels as ``"text"``, ``"mlir"`` or ``"cuda"`` (C++ with a host harness;
    NVIDIA targets, one kernel: name it with ``kernel``) for ``target``."""
    if format not in ("text", "mlir", "cuda"):
        raise ValueError(f"format must be text, mlir or cuda, not {format!r}")
    try:
        return _smemsync.emit(source, format, target, kernel, _language(language, target),
                              file_name)
    except _smemsync.Failure as e:
        raise SmemsyncError._from(e) from None


@dataclass(frozen=True)
class ImportedTtgir:
    """A Triton TTGIR module read by smemsync's importer (docs/ttgir.md): ``kir`` is the
    kernel as smemsync's ``.kir`` text (what :func:`sync`, :func:`check`, :func:`run` and
    :func:`emit` take), ``target`` the target Triton compiled for (``"sm_90"``, ``"gfx942"``;
    None when the module does not say), ``warnings`` what the importer modelled
    conservatively or assumed (W11xx), located in the TTGIR."""

    kir: str
    target: Optional[str]
    warnings: List[Diagnostic]


def import_ttgir(source: str, *, file_name: str = "<input>") -> ImportedTtgir:
    """Import Triton's TTGIR (``compiled.asm["ttgir"]``) as a smemsync kernel.

    Typical use: ``imp = import_ttgir(ttgir); smemsync.sync(imp.kir, imp.target)``.
    Raises :class:`SmemsyncError` with a located diagnostic on malformed TTGIR."""
    try:
        raw = _smemsync.import_ttgir(source, file_name)
    except _smemsync.Failure as e:
        raise SmemsyncError._from(e) from None
    return ImportedTtgir(kir=raw["kir"], target=raw["target"],
                         warnings=[Diagnostic._from(w) for w in raw["warnings"]])


def targets() -> List[str]:
    """The target names this build knows."""
    return list(_smemsync.targets())
