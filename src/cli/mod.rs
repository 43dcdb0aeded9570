//! The `smemsync` command line: one module per subcommand, each with its options and `run`.
//!
//! Exit codes: 0 success; 1 a finding (race, deadlock, protocol violation); 2 bad input or
//! usage (the diagnostics say where); 3 an internal error (a pass produced invalid IR).

pub mod bench;
pub mod check;
pub mod emit;
pub mod explain;
pub mod fmt;
pub mod import;
pub mod pipeline;
pub mod plan_smem;
pub mod run;
pub mod sync;
pub mod waits;

use std::io::{IsTerminal, Read};
use std::sync::OnceLock;

use smemsync::diag::{Diagnostic, render_all};
use smemsync::target::{Limits, Target};

pub const EXIT_OK: i32 = 0;
pub const EXIT_USER: i32 = 2;
pub const EXIT_INTERNAL: i32 = 3;

/// Exit codes from diagnostics: the worst of the errors (3 a pass broke an invariant, 2 bad
/// input or usage, 1 a finding); 0 when there are only warnings. The library decides the kind
/// (`smemsync::ErrorKind::of`), so the CLI and library users classify failures alike.
pub fn exit_code(diags: &[Diagnostic]) -> i32 {
    smemsync::ErrorKind::of(diags).map_or(EXIT_OK, smemsync::ErrorKind::exit_code)
}

/// An input file: its display name and text. `-` reads standard input.
pub struct Input {
    pub name: String,
    pub text: String,
    /// For a TTGIR input: its original text and the import's side tables (`text` then holds
    /// the imported `.kir`).
    pub ttgir: Option<(String, smemsync::reader::ttgir::Imported)>,
}

pub fn read_input(path: &str) -> Result<Input, String> {
    let (name, bytes) = if path == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        ("<stdin>".to_string(), bytes)
    } else {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read `{path}`: {e}"))?;
        (path.to_string(), bytes)
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        let bad = e.utf8_error().valid_up_to();
        let good = std::str::from_utf8(&e.as_bytes()[..bad]).unwrap_or_default();
        let (line, col, _) = smemsync::diag::line_of(good, bad);
        format!(
            "{name}:{}:{}: invalid UTF-8 at byte {bad} (the input must be UTF-8 text)",
            line + 1,
            col + 1
        )
    })?;
    if name.ends_with(".ttgir") || smemsync::reader::ttgir::looks_like_ttgir(&text) {
        return import_input(name, text);
    }
    Ok(Input {
        name,
        text,
        ttgir: None,
    })
}

/// Imports a TTGIR input (docs/ttgir.md): its warnings are reported against the TTGIR text;
/// the input's `text` becomes the `.kir`.
fn import_input(name: String, text: String) -> Result<Input, String> {
    let original = Input {
        name: name.clone(),
        text: text.clone(),
        ttgir: None,
    };
    match smemsync::reader::ttgir::import_ttgir(&text) {
        Ok(imp) => {
            report(&original, &imp.warnings);
            Ok(Input {
                name: format!("{name} (imported as .kir)"),
                text: imp.kir.clone(),
                ttgir: Some((text, imp)),
            })
        }
        Err(diags) => {
            report(&original, &diags);
            Err(format!("`{name}` could not be imported as TTGIR"))
        }
    }
}

/// The command line that synchronizes `input` for `target` (the resolved one: given or
/// declared, [`resolve_target`]; gfx942 when there is none) and pipes the result into
/// `smemsync {then}`: what a refusal of an unsynchronized kernel
/// suggests. A kernel read from standard input is named `FILE`.
pub fn sync_then(input: &Input, target: Option<&str>, then: &str) -> String {
    let t = target.unwrap_or("gfx942");
    let file = if input.name == "<stdin>" {
        "FILE"
    } else {
        &input.name
    };
    format!("smemsync sync --target {t} {file} | smemsync {then}")
}

/// How diagnostics are written on stderr.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MessageFormat {
    /// Rendered for people: the source with labels, in colour on a terminal.
    #[default]
    Text,
    /// One JSON object per diagnostic, one per line (docs/diagnostics.md).
    Json,
}

/// The `--format` option of the subcommands that report diagnostics (`emit`, whose `--format`
/// chooses the output language, takes the same option as `--message-format`).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct FormatArgs {
    /// How diagnostics are written on stderr: `text`, or `json` (one object a line; `sync` then
    /// also writes its result as JSON, docs/diagnostics.md).
    #[arg(
        long = "format",
        visible_alias = "message-format",
        value_enum,
        default_value = "text",
        value_name = "FORMAT"
    )]
    pub format: MessageFormat,
}

/// The format of this run, set once by `main` from the subcommand's options before it runs.
static MESSAGE_FORMAT: OnceLock<MessageFormat> = OnceLock::new();

/// Sets how diagnostics are written (the first call wins; `main` makes the only one).
pub fn set_message_format(f: MessageFormat) {
    let _ = MESSAGE_FORMAT.set(f);
}

/// How diagnostics are written in this run (text unless `--format json` was given).
pub fn message_format() -> MessageFormat {
    MESSAGE_FORMAT.get().copied().unwrap_or_default()
}

/// Prints diagnostics to stderr: rendered (in colour on a terminal, unless `NO_COLOR` is set),
/// or as JSON lines under `--format json`.
pub fn report(input: &Input, diags: &[Diagnostic]) {
    if message_format() == MessageFormat::Json {
        for d in diags {
            eprintln!("{}", d.to_json(&input.name, &input.text));
        }
        return;
    }
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    eprint!("{}", render_all(diags, &input.name, &input.text, color));
}

/// Reports a usage error that has no place in a source (an option's value, a file that cannot
/// be read or written) and returns exit code 2. Text: `error: MSG`; JSON: a diagnostic with
/// code E0010, no labels.
pub fn fail(msg: &str) -> i32 {
    match message_format() {
        MessageFormat::Json => {
            let d = Diagnostic::user("E0010", msg);
            eprintln!("{}", d.to_json("", ""));
        }
        MessageFormat::Text => eprintln!("error: {msg}"),
    }
    EXIT_USER
}

/// Parses and verifies every kernel of an input against the limits of every target,
/// reporting failures.
pub fn load(input: &Input) -> Result<Vec<smemsync::Kernel>, i32> {
    load_for(input, &Limits::GENERIC)
}

/// Parses and verifies every kernel of an input against `limits`, reporting failures. Every
/// verifier complaint about an input is bad input (exit 2), whatever its kind.
pub fn load_for(input: &Input, limits: &Limits) -> Result<Vec<smemsync::Kernel>, i32> {
    verified(input, smemsync::reader::parse(&input.text), limits)
}

/// [`load_for`] of an input already parsed (`parsed`, its parse).
fn verified(input: &Input, parsed: Parsed, limits: &Limits) -> Result<Vec<smemsync::Kernel>, i32> {
    let module = match parsed {
        Ok(m) => m,
        Err(d) => {
            report(input, &[d]);
            return Err(EXIT_USER);
        }
    };
    let mut errs = smemsync::verify::limits::duplicate_names(&module.kernels);
    for k in &module.kernels {
        errs.extend(smemsync::verify::verify_with(k, limits));
    }
    if !errs.is_empty() {
        report(input, &errs);
        return Err(EXIT_USER);
    }
    Ok(module.kernels)
}

/// What parsing an input gave: its module or the parse error.
type Parsed = Result<smemsync::reader::Module, Diagnostic>;

/// Parses and verifies every kernel of an input for a target: its limits and its ops
/// (`verify::target_ops`), reporting failures; with no target, the limits of every target.
pub fn load_for_target(
    input: &Input,
    target: Option<&Target>,
) -> Result<Vec<smemsync::Kernel>, i32> {
    verified_for_target(input, smemsync::reader::parse(&input.text), target)
}

/// [`load_for_target`] of an input already parsed (`parsed`, its parse).
fn verified_for_target(
    input: &Input,
    parsed: Parsed,
    target: Option<&Target>,
) -> Result<Vec<smemsync::Kernel>, i32> {
    let kernels = verified(input, parsed, &limits_of(target))?;
    // Concrete layouts (issue 14): malformed definitions fail; opaque fall-backs warn.
    let warp = target.map_or(32, |t| t.warp);
    let (errs, warns): (Vec<_>, Vec<_>) = kernels
        .iter()
        .flat_map(|k| smemsync::ir::layout::diagnostics(k, warp))
        .partition(|d| d.severity == smemsync::diag::Severity::Error);
    if !errs.is_empty() {
        report(input, &errs);
        return Err(EXIT_USER);
    }
    if !warns.is_empty() {
        report(input, &warns);
    }
    let Some(t) = target else {
        return Ok(kernels);
    };
    let errs: Vec<_> = kernels
        .iter()
        .flat_map(|k| smemsync::verify::target_ops::check(k, t))
        .collect();
    if !errs.is_empty() {
        report(input, &errs);
        return Err(EXIT_USER);
    }
    Ok(kernels)
}

/// The target a command works for: `--target` when given, else the one the input's kernels
/// declare (`target "…"` in the header, which `sync` writes). A `--target` that contradicts a
/// declaration, or kernels that declare different targets, are usage errors (exit 2).
pub fn resolve_target(input: &Input, given: Option<&str>) -> Result<Option<String>, i32> {
    resolve_parsed_target(input, &smemsync::reader::parse(&input.text), given)
}

/// [`resolve_target`] of an input already parsed (`parsed`, its parse).
fn resolve_parsed_target(
    input: &Input,
    parsed: &Parsed,
    given: Option<&str>,
) -> Result<Option<String>, i32> {
    // A file that does not parse is reported by the load that follows.
    let Ok(module) = parsed else {
        return Ok(given.map(str::to_string));
    };
    let mut declared: Option<&str> = None;
    for k in &module.kernels {
        let Some(t) = k.target.as_deref() else {
            continue;
        };
        let clash = match (given, declared) {
            (Some(g), _) if g != t => Some(format!(
                "--target {g} contradicts the target @{} was synchronized for ({t})",
                k.name
            )),
            (None, Some(d)) if d != t => Some(format!(
                "the kernels of this file declare different targets ({d} and {t}); give --target"
            )),
            _ => None,
        };
        if let Some(msg) = clash {
            let d = smemsync::diag::Diagnostic::user("E0171", msg)
                .with_label(k.target_span, "declared here")
                .with_help("drop --target to use the declared one, or synchronize again");
            report(input, &[d]);
            return Err(EXIT_USER);
        }
        declared = Some(t);
    }
    Ok(given.or(declared).map(str::to_string))
}

/// The limits of an optional target (those of every target when absent).
pub fn limits_of(target: Option<&Target>) -> Limits {
    target.map_or(Limits::GENERIC, |t| t.limits)
}

/// How a subcommand that needs a target picks one from the input when `--target` is absent
/// and the input declares none (`plan-smem`: the first target that has every op).
pub type PickTarget = fn(&Input) -> Result<Target, Diagnostic>;

/// An input read, its target found and its kernels parsed and verified for that target.
pub struct Loaded {
    pub input: Input,
    /// `None`: no target given or declared; the generic model and every target's limits.
    pub target: Option<Target>,
    pub kernels: Vec<smemsync::Kernel>,
}

const TARGET_REQUIRED: &str = "--target is required (the input declares no target)";

/// What [`load_with`] does when `--target` is absent and the input declares none.
enum NoTarget {
    /// Goes on without one.
    Generic,
    /// Refuses (a usage error).
    Refuse,
    /// Takes the one this picks.
    Pick(PickTarget),
}

/// The preamble of the subcommands that read one kernel file: reads `file` (`-` for standard
/// input), finds the target (`given`, else the declared one, see [`resolve_target`], else as
/// `none` says), and parses and verifies the kernels for it ([`load_for_target`]). Each
/// failure is reported; the error is the exit code.
fn load_with(file: &str, given: Option<&str>, none: NoTarget) -> Result<Loaded, i32> {
    let input = read_input(file).map_err(|e| fail(&e))?;
    // Parsed once: the declared target and the kernels come from the same parse.
    let parsed = smemsync::reader::parse(&input.text);
    let target = match (resolve_parsed_target(&input, &parsed, given)?, none) {
        (Some(name), _) => Some(Target::from_name(&name)),
        (None, NoTarget::Generic) => None,
        // A file that does not parse cannot declare a target: its errors say why, not this.
        (None, NoTarget::Refuse) if parsed.is_ok() => return Err(fail(TARGET_REQUIRED)),
        (None, NoTarget::Refuse) => None,
        (None, NoTarget::Pick(pick)) => Some(pick(&input)),
    };
    let target = match target.transpose() {
        Ok(t) => t,
        Err(d) => {
            report(&input, &[d]);
            return Err(EXIT_USER);
        }
    };
    let kernels = verified_for_target(&input, parsed, target.as_ref())?;
    Ok(Loaded {
        input,
        target,
        kernels,
    })
}

/// The preamble of `check` and `run` (see [`load_with`]): with no target given or declared, the
/// generic model.
pub fn load_file(file: &str, given: Option<&str>) -> Result<Loaded, i32> {
    load_with(file, given, NoTarget::Generic)
}

/// The preamble of the subcommands that need a target (see [`load_with`]): with none given or
/// declared, the one `pick` chooses; without `pick` (`sync`, `waits`) a usage error.
pub fn load_file_for_target(
    file: &str,
    given: Option<&str>,
    pick: Option<PickTarget>,
) -> Result<(Input, Target, Vec<smemsync::Kernel>), i32> {
    let l = load_with(file, given, pick.map_or(NoTarget::Refuse, NoTarget::Pick))?;
    match l.target {
        Some(t) => Ok((l.input, t, l.kernels)),
        None => Err(fail(TARGET_REQUIRED)),
    }
}

/// `--bounds`, the same option on every subcommand that takes parameter values.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct BoundsArgs {
    /// Values of scalar parameters, `NAME=VALUE`: comma-separated or repeated (`n=64,m=3` is
    /// `--bounds n=64 --bounds m=3`). The interpreter runs with them (`check`, `run`);
    /// placement counts executed barriers with them (`sync`, `plan-smem`).
    #[arg(long, value_delimiter = ',', value_name = "NAME=VALUE")]
    pub bounds: Vec<String>,
}

impl BoundsArgs {
    /// The values, each name once ([`parse_bounds`]).
    pub fn parse(&self) -> Result<Vec<(String, i64)>, String> {
        parse_bounds(self.bounds.iter().map(String::as_str))
    }
}

/// Reads an input (`-` for standard input) and parses and verifies its kernels, reporting
/// any failure; the error is the exit code.
pub fn read_kernels(path: &str) -> Result<(Input, Vec<smemsync::Kernel>), i32> {
    let input = read_input(path).map_err(|e| fail(&e))?;
    let kernels = load(&input)?;
    Ok((input, kernels))
}

/// Parses `--bounds` items `NAME=VALUE`: each name once, each value an i32 (what a scalar
/// parameter holds).
pub fn parse_bounds<'a>(
    items: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<(String, i64)>, String> {
    let mut out: Vec<(String, i64)> = Vec::new();
    for item in items.into_iter().map(str::trim).filter(|x| !x.is_empty()) {
        let (n, v) = item
            .split_once('=')
            .ok_or_else(|| format!("--bounds `{item}`: expected NAME=VALUE"))?;
        let name = n.trim().trim_start_matches('%').to_string();
        let v: i64 = v
            .trim()
            .parse()
            .map_err(|_| format!("--bounds `{item}`: `{}` is not an integer", v.trim()))?;
        if i32::try_from(v).is_err() {
            return Err(format!(
                "--bounds `{item}`: {v} is out of the i32 range of a scalar parameter"
            ));
        }
        if out.iter().any(|(m, _)| *m == name) {
            return Err(format!("--bounds names `{name}` twice"));
        }
        out.push((name, v));
    }
    Ok(out)
}
