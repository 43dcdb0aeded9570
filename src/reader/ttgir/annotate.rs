//! Annotated TTGIR placeholder (filled below).
