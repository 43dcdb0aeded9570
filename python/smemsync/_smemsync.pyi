"""Type stubs of the Rust extension (use the ``smemsync`` package, not this module)."""

from typing import Any, Dict, List, Optional, Tuple

class Failure(Exception):
    """Raised with one dict argument describing the failure; smemsync.SmemsyncError wraps it."""

def sync(source: str, target: str, explain: bool, strategy: str, warp_sync: bool,
         bounds: Dict[str, int], language: str, file_name: str) -> Dict[str, Any]: ...
def check(source: str, target: Optional[str], block: Optional[Tuple[int, int, int]],
          bounds: Dict[str, int], schedules: int, prove: bool, language: str,
          file_name: str) -> List[Dict[str, Any]]: ...
def run(source: str, target: Optional[str], block: Optional[Tuple[int, int, int]],
        bounds: Dict[str, int], seed: int, language: str,
        file_name: str) -> Dict[str, Dict[str, Dict[str, Any]]]: ...
def emit(source: str, format: str, target: str, kernel: Optional[str], language: str,
         file_name: str) -> str: ...
def targets() -> List[str]: ...
