//! Raw, file-shaped configuration: reading TOML files, applying `--set key=value`
//! overrides, and deserialising into the `Raw*` structs with errors that name the file (or
//! the override) and the dotted key.
//!
//! Validation of values (ranges, cross-field rules) happens when a `Raw*` struct is turned
//! into its validated model, not here.

mod error;

pub use error::InputError;
use serde::de::DeserializeOwned;
use std::io::Read;
use std::path::Path;

/// One `--set key=value` override, already split and parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    /// Dotted key as typed, e.g. `queries.skew` or `machine.system.ranks`.
    pub key: String,
    /// The original `key=value` text, for error messages.
    pub text: String,
    pub value: toml::Value,
}

/// Dotted parts an override's key may have: the deepest key of any input file has 4
/// (`machine.dpu.instructions.alu`), and each part is a level of tables
/// to build and walk.
const MAX_KEY_PARTS: usize = 8;

impl Override {
    /// Parses `key=value`. The value is read as a TOML value (`1.2`, `true`, `"x"`, `[1, 2]`);
    /// anything that is not valid TOML is taken as a bare string, so `queries.kind=get` works.
    pub fn parse(text: &str) -> Result<Override, InputError> {
        let origin = format!("--set {text}");
        let Some((key, raw_value)) = text.split_once('=') else {
            return Err(InputError::plain(origin, "expected key=value"));
        };
        let key = key.trim();
        if key.is_empty() || key.split('.').any(|part| part.trim().is_empty()) {
            return Err(InputError::plain(
                origin,
                "the key is empty or has an empty part",
            ));
        }
        let parts = key.split('.').count();
        if parts > MAX_KEY_PARTS {
            return Err(InputError::plain(
                origin,
                format!("the key has {parts} dotted parts; no key has more than {MAX_KEY_PARTS}"),
            ));
        }
        let raw_value = raw_value.trim();
        let value = match toml::from_str::<toml::Table>(&format!("v = {raw_value}")) {
            // After a line break TOML reads more keys or tables of its own, not this one's.
            Ok(table) if table.len() > 1 => {
                return Err(InputError::key(
                    origin,
                    key,
                    "the value is followed by more TOML (a line break starts another key or table); give one value per --set",
                ));
            }
            Ok(mut table) => table.remove("v").expect("parsed table holds v"),
            // A well-formed integer TOML refused is one out of its range, not a string.
            Err(_) if is_integer_beyond_toml(raw_value) => {
                return Err(InputError::key(
                    origin,
                    key,
                    format!("{raw_value} is beyond TOML's integers (-2^63 to 2^63 - 1)"),
                ));
            }
            // So is a number too large for a float (`1e400`).
            Err(_) if is_float_beyond_toml(raw_value) => {
                return Err(InputError::key(
                    origin,
                    key,
                    format!("{raw_value} is beyond the largest number TOML holds (about 1.8e308)"),
                ));
            }
            Err(_) => toml::Value::String(raw_value.to_owned()),
        };
        Ok(Override {
            key: key.to_owned(),
            text: text.to_owned(),
            value,
        })
    }

    /// The override's key without `prefix.`, when it starts with that prefix.
    pub fn strip_prefix(&self, prefix: &str) -> Option<&str> {
        self.key
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('.'))
    }
}

/// Whether `text` is a number (digits, not `inf`) too large for a 64-bit float.
fn is_float_beyond_toml(text: &str) -> bool {
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    plain.bytes().any(|b| b.is_ascii_digit()) && plain.parse::<f64>().is_ok_and(|x| x.is_infinite())
}

/// Whether `text` is a decimal integer as TOML writes one (a sign, digits, single
/// underscores between digits, no leading zero) that is beyond TOML's 64-bit integers.
fn is_integer_beyond_toml(text: &str) -> bool {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    let well_formed = !digits.is_empty()
        && digits
            .split('_')
            .all(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()))
        && !(digits.len() > 1 && digits.starts_with('0'));
    let plain: String = digits.chars().filter(|&c| c != '_').collect();
    // TOML's integers run from -2^63 to 2^63 - 1; more digits than u128 holds is beyond too.
    let most: u128 = if text.starts_with('-') {
        1 << 63
    } else {
        (1 << 63) - 1
    };
    well_formed && plain.parse::<u128>().map_or(true, |n| n > most)
}

/// The largest machine or workload file read, in bytes. The shipped files are a few KiB;
/// the limit keeps a wrong path (a log, an image) from being read whole into memory.
pub const MAX_INPUT_FILE_BYTES: u64 = 1 << 20;

/// Reads a TOML file into a table. A missing or unreadable file, one that is not a
/// regular file, one over [`MAX_INPUT_FILE_BYTES`], or invalid TOML is an [`InputError`]
/// naming the file.
pub fn read_toml_file(path: &Path) -> Result<toml::Table, InputError> {
    let origin = path.display().to_string();
    let limit = (
        MAX_INPUT_FILE_BYTES,
        "(1 MiB) limit for pimdes's TOML inputs (machines, workloads, manifests)",
    );
    let text = read_text_file(path, limit, "a TOML file")
        .map_err(|reason| InputError::plain(&origin, reason))?;
    parse_toml(&origin, &text)
}

/// Bytes of a JSON file pimdes reads back (a result, a sweep's index or its collected
/// results): far above any it writes (a paper-scale result is about 20 KB, a sweep's
/// collected results about 1 KB a point), and far below this machine's memory.
pub const MAX_JSON_FILE_BYTES: u64 = 256 << 20;

/// The text of a regular JSON file of at most [`MAX_JSON_FILE_BYTES`]; the reason it
/// cannot be read otherwise.
pub fn read_json_file(path: &Path) -> Result<String, String> {
    let limit = (MAX_JSON_FILE_BYTES, "(256 MiB) limit for JSON inputs");
    read_text_file(path, limit, "a JSON file")
}

/// The UTF-8 text of a regular file of at most `limit.0` bytes (`limit.1` says which
/// limit in the error), or why not (`kind` names what to give instead of a directory or
/// device). The file type is checked on the metadata, before opening, because opening a
/// FIFO blocks until a writer comes and a device such as `/dev/zero` never ends; the read
/// is bounded too, in case the file grows after the check.
fn read_text_file(path: &Path, limit: (u64, &str), kind: &str) -> Result<String, String> {
    let (max_bytes, which) = limit;
    let metadata = std::fs::metadata(path).map_err(|e| format!("cannot read the file: {e}"))?;
    if !metadata.is_file() {
        let what = if metadata.is_dir() {
            "a directory"
        } else {
            "not a regular file (a FIFO, device or socket)"
        };
        return Err(format!("is {what}; give {kind}"));
    }
    let too_big = |size: String| format!("is {size} bytes, more than the {max_bytes}-byte {which}");
    if metadata.len() > max_bytes {
        return Err(too_big(metadata.len().to_string()));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read the file: {e}"))?;
    let mut bytes = Vec::new();
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the file: {e}"))?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_big(format!("over {max_bytes}")));
    }
    String::from_utf8(bytes).map_err(|e| {
        // Where, as an editor shows it: the line and column of the first bad byte.
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = valid.len() - valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) + 1;
        format!("cannot read the file: it is not UTF-8 text (line {line}, column {column}: a byte that is not UTF-8)")
    })
}

/// Parses TOML text into a table; `origin` names the text in errors.
pub fn parse_toml(origin: &str, text: &str) -> Result<toml::Table, InputError> {
    text.parse::<toml::Table>().map_err(|e| {
        let message = e.to_string();
        // The parser's words for an integer beyond 64 bits, said as `--set` says them.
        let message = match message.trim().rsplit_once('\n') {
            Some((head, last)) => match last
                .strip_prefix("invalid type: integer `")
                .and_then(|rest| rest.strip_suffix("` as i128, expected any valid TOML value"))
            {
                Some(n) => format!("{head}\n{n} is beyond TOML's integers (-2^63 to 2^63 - 1)"),
                None => message,
            },
            None => message,
        };
        InputError::plain(origin, format!("invalid TOML: {}", message.trim()))
    })
}

/// A number as people read it in a message: as written between 10^-6 and 10^15, else in
/// scientific notation (`1e300`, not three hundred digits).
pub fn shown(x: f64) -> String {
    let magnitude = x.abs();
    if x == 0.0 || !x.is_finite() || (1e-6..1e15).contains(&magnitude) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// `n` and its noun, plural but for one: `1 tasklet`, `16 tasklets` (for nouns whose
/// plural takes an `s`).
pub fn counted(n: impl Into<u64>, noun: &str) -> String {
    match n.into() {
        1 => format!("1 {noun}"),
        n => format!("{n} {}", plural(noun)),
    }
}

/// The plural of an English noun as the messages use them: `batch` -> `batches`, `query`
/// -> `queries`, `point` -> `points` (of the last word when there are several).
fn plural(noun: &str) -> String {
    let vowel = |c: char| "aeiou".contains(c);
    if ["s", "x", "ch", "sh"].iter().any(|end| noun.ends_with(end)) {
        format!("{noun}es")
    } else if let Some(stem) = noun.strip_suffix('y')
        && stem.chars().last().is_some_and(|c| !vowel(c))
    {
        format!("{stem}ies")
    } else {
        format!("{noun}s")
    }
}

/// The first item of `items` that an earlier one equals: a value listed twice.
pub fn first_repeated<T: PartialEq>(items: &[T]) -> Option<&T> {
    (1..items.len()).find_map(|i| items[..i].contains(&items[i]).then_some(&items[i]))
}

/// Writes `value` at the dotted `key` of `table`, creating intermediate tables, and
/// returns the sections it created (dotted), so errors about them can name the override.
/// Whether the key exists in the schema is checked later, by deserialisation.
fn set_path(
    table: &mut toml::Table,
    key: &str,
    value: toml::Value,
    origin: &str,
) -> Result<Vec<String>, InputError> {
    let parts: Vec<&str> = key.split('.').map(str::trim).collect();
    let Some((last, parents)) = parts.split_last() else {
        return Err(InputError::plain(origin, "the key is empty"));
    };
    let mut created = Vec::new();
    let mut current = table;
    for (depth, part) in parents.iter().enumerate() {
        if !current.contains_key(*part) {
            created.push(parts[..=depth].join("."));
        }
        let entry = current
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        current = match entry {
            toml::Value::Table(t) => t,
            _ => {
                return Err(InputError::key(
                    origin,
                    &parts[..=depth].join("."),
                    "is a value, not a section, so it has no sub-keys",
                ));
            }
        };
    }
    current.insert(last.to_string(), value);
    Ok(created)
}

/// Where each key of a configuration came from: the file, or an override that set it.
/// Used to name the right origin in errors found after deserialisation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Attribution {
    pub origin: String,
    /// Overrides applied, as (key relative to the file, original `key=value` text).
    pub overrides: Vec<(String, String)>,
    /// Sections absent from the file that an override created, as (section relative to
    /// the file, original `key=value` text): a field missing there is the override's doing.
    pub created_sections: Vec<(String, String)>,
    /// Keys (relative to the file) whose value after every override is the one the file
    /// had (numbers compared by value: `60.0` is the file's `60`).
    pub unchanged: Vec<String>,
    /// Keys whose number an override raised above the file's (or that the file lacked).
    pub raised: Vec<String>,
}

impl Attribution {
    /// An error about `key` (dotted, relative to the file): attributed to the override
    /// that set the key, or to the file.
    pub fn error_at(&self, key: &str, reason: impl Into<String>) -> InputError {
        let reason = reason.into();
        let key = (!key.is_empty() && key != ".").then_some(key);
        if let Some(e) = self.missing_in_created_section(key, &reason) {
            return e;
        }
        if let Some(e) = self.missing_field(key, &reason) {
            return e;
        }
        let by_override = self
            .overrides
            .iter()
            .rev()
            .find(|(relative, _)| override_blamed(relative, key, &reason));
        match by_override {
            Some((relative, text)) => InputError::key(format!("--set {text}"), relative, reason),
            None => InputError::new(self.origin.clone(), key, reason),
        }
    }

    /// An error about a rule between `keys` (dotted, relative to the file; the first is
    /// the one the rule is stated on): attributed to the first of them an override set,
    /// since that override broke the rule, or else to the file at the first key.
    pub fn error_at_any(&self, keys: &[&str], reason: impl Into<String>) -> InputError {
        // Which of several overrides broke the rule is not known: all are named.
        let first = keys.first().copied().unwrap_or("");
        blame_rule(&[(self, keys)], (self, first), reason)
    }

    /// Whether an override raised the number at `key` above the file's, or supplied a key
    /// the file lacked: a capacity raised may have been what let a run fit.
    pub fn raised(&self, key: &str) -> bool {
        self.raised.iter().any(|k| k == key)
    }

    /// The last `--set` of exactly `key` (not of a section holding it), when the key's final
    /// value differs from the file's: the override that changed it.
    pub fn changed(&self, key: &str) -> Option<&str> {
        let (_, text) = self.overrides.iter().rev().find(|(k, _)| k == key)?;
        (!self.unchanged.iter().any(|k| k == key)).then_some(text.as_str())
    }

    /// The override that set `key` (dotted, relative to the file), if one did: the last
    /// one that set the key itself or replaced a section holding it.
    pub fn override_of(&self, key: &str) -> Option<&str> {
        self.overrides
            .iter()
            .rev()
            .find(|(relative, _)| covers(relative, key))
            .map(|(_, text)| text.as_str())
    }

    /// A field serde found missing from the section at `key`: named by its own dotted key
    /// (serde names the section), and blamed on an override that replaced the section.
    fn missing_field(&self, key: Option<&str>, reason: &str) -> Option<InputError> {
        let field = quoted_field(reason, "missing field `")?;
        let full = match key {
            Some(section) => format!("{section}.{field}"),
            None => field.to_string(),
        };
        let reason = "missing, and it has no default: the file must set it";
        let by_override = self.overrides.iter().rev().find(|(r, _)| covers(r, &full));
        Some(match by_override {
            Some((relative, text)) => InputError::key(
                format!("--set {text}"),
                &full,
                format!("missing, and it has no default: `{relative}` replaced the section"),
            ),
            None => InputError::new(self.origin.clone(), Some(&full), reason),
        })
    }

    /// A field missing from a section that exists only because an override created it:
    /// the override is to blame, and the message says which key to set with it.
    fn missing_in_created_section(&self, key: Option<&str>, reason: &str) -> Option<InputError> {
        let field = quoted_field(reason, "missing field `")?;
        let section = key?;
        let (_, text) = self.created_sections.iter().find(|(s, _)| s == section)?;
        let full = format!("{section}.{field}");
        Some(InputError::key(
            format!("--set {text}"),
            &full,
            format!(
                "{reason}: the file has no [{section}] section, so it comes from this override alone; set `{full}` too (--set {full}=...)"
            ),
        ))
    }
}

/// Whether the error at `key` with `reason` is about what the override of `relative` set:
/// the key itself, or the unknown field the override introduced (serde reports an unknown
/// field at the path of its section, or at the field's own path when it is a table).
fn override_blamed(relative: &str, key: Option<&str>, reason: &str) -> bool {
    if key.is_some_and(|k| covers(relative, k)) {
        return true;
    }
    let Some(field) = quoted_field(reason, "unknown field `") else {
        return false;
    };
    let at_or_below = |path: &str| {
        relative == path
            || relative
                .strip_prefix(path)
                .is_some_and(|rest| rest.starts_with('.'))
    };
    let below_section = match key {
        None => field.to_owned(),
        Some(k) => format!("{k}.{field}"),
    };
    let is_field_path = key.is_some_and(|k| k.rsplit('.').next() == Some(field));
    at_or_below(&below_section) || (is_field_path && key.is_some_and(at_or_below))
}

/// An error about a rule between keys of several files (the machine's and the workload's):
/// every `--set` of one of the keys `parts` list, file by file, is named, at the first such
/// key, since one of them broke the rule; with none, the error is the `fallback` file's, at
/// its key.
pub fn blame_rule(
    parts: &[(&Attribution, &[&str])],
    fallback: (&Attribution, &str),
    reason: impl Into<String>,
) -> InputError {
    let named: Vec<(&str, &str)> = parts
        .iter()
        .flat_map(|(file, keys)| keys.iter().filter_map(|&k| Some((k, file.override_of(k)?))))
        .collect();
    match named.first() {
        None => fallback.0.error_at(fallback.1, reason),
        Some(&(first, _)) => {
            InputError::key(joined_sets(named.iter().map(|&(_, t)| t)), first, reason)
        }
    }
}

/// `--set A and --set B`: the overrides `texts`, each once (one that replaced a section
/// may have decided several keys of a rule).
pub fn joined_sets<'a>(texts: impl IntoIterator<Item = &'a str>) -> String {
    let mut sets: Vec<String> = Vec::new();
    for text in texts {
        let set = format!("--set {text}");
        if !sets.contains(&set) {
            sets.push(set);
        }
    }
    sets.join(" and ")
}

/// Whether an override of `relative` decided `key`: it set the key itself, or it replaced
/// a whole section holding the key (`--set 'machine.dma={...}'` decides every `dma.*`,
/// including those it leaves to their defaults).
pub fn covers(relative: &str, key: &str) -> bool {
    key.strip_prefix(relative)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// Whether two TOML values are the same, numbers by value (an integer equals the float of
/// its value), tables and arrays element by element.
fn same_value(a: &toml::Value, b: &toml::Value) -> bool {
    use toml::Value::{Array, Float, Integer, Table};
    match (a, b) {
        (Integer(i), Float(x)) | (Float(x), Integer(i)) => *i as f64 == *x,
        (Array(p), Array(q)) => {
            p.len() == q.len() && p.iter().zip(q).all(|(x, y)| same_value(x, y))
        }
        (Table(p), Table(q)) => {
            p.len() == q.len()
                && p.iter()
                    .all(|(k, x)| q.get(k).is_some_and(|y| same_value(x, y)))
        }
        _ => a == b,
    }
}

/// A file of the other kind (a workload given as `--machine`, or a machine as
/// `--workload`): refused as such, before serde names its first unknown section. `own` are
/// sections only a file of the expected kind has, `other` those only the other kind has.
pub fn check_kind(
    origin: &str,
    table: &toml::Table,
    expected: &str,
    own: &[&str],
    other: (&str, &[&str]),
) -> Result<(), InputError> {
    let (kind, sections) = other;
    let found: Vec<&str> = sections
        .iter()
        .copied()
        .filter(|s| table.contains_key(*s))
        .collect();
    if found.is_empty() || own.iter().any(|s| table.contains_key(*s)) {
        return Ok(());
    }
    let has = found.iter().map(|s| format!("[{s}]")).collect::<Vec<_>>();
    Err(InputError::plain(
        origin,
        format!(
            "this is a {kind} file (it has {}), not a {expected} file: were --machine and --workload swapped?",
            has.join(" and ")
        ),
    ))
}

/// The name quoted right after `prefix` in a serde message (`unknown field `x`, ...`).
fn quoted_field<'r>(reason: &'r str, prefix: &str) -> Option<&'r str> {
    let rest = &reason[reason.find(prefix)? + prefix.len()..];
    rest.split('`').next()
}

/// Writes every `-0.0` of `table` as `0.0`: the same value, so it must give the same
/// configuration, its echo and its hash (`skew = -0.0` printed `-0` and hashed apart).
fn positive_zeros(table: &mut toml::Table) {
    fn visit(value: &mut toml::Value) {
        match value {
            toml::Value::Float(x) if *x == 0.0 => *x = 0.0,
            toml::Value::Array(items) => items.iter_mut().for_each(visit),
            toml::Value::Table(t) => t.iter_mut().for_each(|(_, v)| visit(v)),
            _ => {}
        }
    }
    table.iter_mut().for_each(|(_, v)| visit(v));
}

/// A configuration source: a table read from a file with the overrides that apply to it.
pub struct Source {
    pub table: toml::Table,
    pub attribution: Attribution,
    /// What an override's key starts with to reach this file (`machine`), if anything.
    pub prefix: Option<String>,
}

impl Source {
    /// Applies every override whose key starts with `prefix.` (or, with `prefix = None`,
    /// every override except those starting with one of `exclude_prefixes`).
    pub fn new(
        origin: String,
        mut table: toml::Table,
        overrides: &[Override],
        prefix: Option<&str>,
        exclude_prefixes: &[&str],
    ) -> Result<Source, InputError> {
        let mut applied: Vec<(String, String)> = Vec::new();
        let mut created_sections = Vec::new();
        let original = toml::Value::Table(table.clone());
        for o in overrides {
            let relative = match prefix {
                Some(p) => match o.strip_prefix(p) {
                    Some(rest) => rest.to_owned(),
                    None => continue,
                },
                None => {
                    if exclude_prefixes.iter().any(|p| o.strip_prefix(p).is_some()) {
                        continue;
                    }
                    o.key.clone()
                }
            };
            let created = set_path(
                &mut table,
                &relative,
                o.value.clone(),
                &format!("--set {}", o.text),
            )?;
            created_sections.extend(created.into_iter().map(|s| (s, o.text.clone())));
            applied.push((relative, o.text.clone()));
        }
        positive_zeros(&mut table);
        let fin = toml::Value::Table(table.clone());
        let unchanged = (applied.iter().map(|(key, _)| key))
            .filter(
                |key| match (value_at(&original, key), value_at(&fin, key)) {
                    (Some(was), Some(is)) => same_value(was, is),
                    _ => false,
                },
            )
            .cloned()
            .collect();
        let raised = (applied.iter().map(|(key, _)| key))
            .filter(|key| raised(value_at(&original, key), value_at(&fin, key)))
            .cloned()
            .collect();
        Ok(Source {
            table,
            attribution: Attribution {
                origin,
                overrides: applied,
                created_sections,
                unchanged,
                raised,
            },
            prefix: prefix.map(str::to_owned),
        })
    }

    /// Deserialises the table into `T`. An error names the override when the failing key
    /// was set by one, else the file.
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T, InputError> {
        self.deserialize_ranged::<T>(Hints {
            range: &|_| None,
            elsewhere: &|_| Vec::new(),
        })
    }

    /// [`deserialize`](Self::deserialize), where a whole number of the wrong type is told
    /// the key's range from `T`'s JSON Schema (the bounds its validation shares: `ranks`
    /// from 1), not only its Rust type's (0 or more).
    pub fn deserialize_bounded<T: DeserializeOwned + schemars::JsonSchema>(
        &self,
    ) -> Result<T, InputError> {
        let schema = schema_of::<T>;
        // The schema is made only for a table that holds an array (machines and workloads
        // have none): every load would pay for it otherwise, each point of a sweep too.
        let table = toml::Value::Table(self.table.clone());
        let misplaced = (holds_array(&table)).then(|| array_for_table(&schema(), &table));
        if let Some(path) = misplaced.flatten() {
            let set = match &self.prefix {
                Some(prefix) => format!("{prefix}.{path}"),
                None => path.clone(),
            };
            let reason = match path.rsplit_once('[') {
                // An element of an array of tables.
                Some((array, _)) => format!(
                    "is a table of keys, given an array; write each as `[[{array}]]` with its keys by name"
                ),
                None => format!(
                    "is a section of keys, given an array; set its keys by name (`[{path}]` in a file, `--set {set}.KEY=VALUE`)"
                ),
            };
            return Err(self.attribution.error_at(&path, reason));
        }
        let hints = Hints {
            range: &|path| schema_range(&schema(), path),
            elsewhere: &|field| keys_named(&schema(), field),
        };
        self.deserialize_ranged::<T>(hints)
    }

    /// Deserialises, saying a whole number's range by `hints.range` of the failing key's
    /// dotted path (serde's, so that an override of a whole section still finds the key's),
    /// and where an unknown key's name is a key of another section.
    fn deserialize_ranged<T: DeserializeOwned>(&self, hints: Hints) -> Result<T, InputError> {
        let value = toml::Value::Table(self.table.clone());
        serde_path_to_error::deserialize::<_, T>(value).map_err(|err| {
            let path = err.path().to_string();
            // The message alone: toml's `Display` appends "in `key`", which the error
            // names already.
            let reason = err.into_inner().message().to_owned();
            let mut reason = match reason.as_str() {
                NOT_A_NAME => self.names_expected::<T>(&path).unwrap_or(reason),
                _ => readable(&reason),
            };
            // Only `readable`'s own tail is rewritten (a quoted value may hold the words).
            if let Some(at) = reason.rfind(WHOLE_NUMBER)
                && let Some((min, max)) = (hints.range)(&path)
            {
                let said = match max {
                    Some(max) => format!(" from {min} to {max}"),
                    None => format!(", {min} or more"),
                };
                reason = format!("{}{WHOLE_NUMBER}{said}", &reason[..at]);
            }
            if let Some(hint) = self.elsewhere_hint(&path, &reason, &hints) {
                reason = format!("{reason}; did you mean {hint}?");
            }
            self.attribution.error_at(&path, reason)
        })
    }

    /// For an unknown key at `path` whose name is a key elsewhere in the file: those keys,
    /// written as the `--set` that brought the unknown one would write them (with the
    /// file's prefix), or as the file does.
    fn elsewhere_hint(&self, path: &str, reason: &str, hints: &Hints) -> Option<String> {
        let field = quoted_field(reason, "unknown field `")?;
        let keys = (hints.elsewhere)(field);
        if keys.is_empty() {
            return None;
        }
        let full = match path {
            "" | "." => field.to_owned(),
            _ => format!("{path}.{field}"),
        };
        let overrides = &self.attribution.overrides;
        let by_set = overrides
            .iter()
            .any(|(rel, _)| covers(rel, &full) || covers(&full, rel));
        let shown = |k: &String| match (&self.prefix, by_set) {
            (Some(prefix), true) => format!("`{prefix}.{k}`"),
            _ => format!("`{k}`"),
        };
        Some(keys.iter().map(shown).collect::<Vec<_>>().join(" or "))
    }

    /// For a choice of names given a value that is no string (serde says only "unit
    /// variant"): the value and the names, found by deserialising again with an empty name
    /// there, which serde refuses listing the names.
    fn names_expected<T: DeserializeOwned>(&self, path: &str) -> Option<String> {
        let mut table = self.table.clone();
        let given = value_at(&toml::Value::Table(table.clone()), path)?.clone();
        set_path(&mut table, path, toml::Value::String(String::new()), "").ok()?;
        let err = serde_path_to_error::deserialize::<_, T>(toml::Value::Table(table)).err()?;
        if err.path().to_string() != path {
            return None;
        }
        let message = err.into_inner().message().to_owned();
        let names = message.strip_prefix("unknown variant ``, ")?;
        Some(format!("{given} is not a name; {names} (a string)"))
    }

    pub fn error_at(&self, key: &str, reason: impl Into<String>) -> InputError {
        self.attribution.error_at(key, reason)
    }

    /// See [`Attribution::error_at_any`].
    pub fn error_at_any(&self, keys: &[&str], reason: impl Into<String>) -> InputError {
        self.attribution.error_at_any(keys, reason)
    }
}

/// serde's reason when a choice of names is given a number or a boolean.
const NOT_A_NAME: &str = "invalid type: unit variant, expected string only";

/// Whether a number went up from `was` (the file's) to `is` (after the overrides), or
/// came where the file had none.
fn raised(was: Option<&toml::Value>, is: Option<&toml::Value>) -> bool {
    let number = |v: Option<&toml::Value>| {
        v.and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
    };
    match (number(was), number(is)) {
        (Some(was), Some(is)) => is > was,
        (None, Some(_)) => true,
        _ => false,
    }
}

/// The value at dotted `path` below `value` (`dpu.dma.alignment_bytes`).
pub fn value_at<'v>(value: &'v toml::Value, path: &str) -> Option<&'v toml::Value> {
    path.split('.').try_fold(value, |v, k| v.get(k))
}

/// How [`readable`] begins its words for a Rust integer type.
const WHOLE_NUMBER: &str = ", expected a whole number";

/// The `minimum` and `maximum` of the integer at dotted `key` in a JSON Schema, following
/// `$ref`s into `$defs`; `None` where the schema states no minimum there.
fn schema_range(schema: &serde_json::Value, key: &str) -> Option<Bounds> {
    let mut node = resolved(schema, schema)?;
    for part in key.split('.') {
        node = resolved(schema, node.get("properties")?.get(part)?)?;
    }
    let bound = |name: &str| node.get(name).and_then(serde_json::Value::as_u64);
    // A maximum the schema leaves to the type's format (a `NonZeroU32`: `uint32`).
    let by_format = match node.get("format").and_then(serde_json::Value::as_str) {
        Some("uint8") => Some(u64::from(u8::MAX)),
        Some("uint16") => Some(u64::from(u16::MAX)),
        Some("uint32") => Some(u64::from(u32::MAX)),
        _ => None,
    };
    Some((bound("minimum")?, bound("maximum").or(by_format)))
}

/// A whole number's least and (when it has one) greatest value.
type Bounds = (u64, Option<u64>);

/// What a failed deserialisation may say besides serde's reason.
struct Hints<'a> {
    /// A whole number's range, by its dotted path.
    range: &'a dyn Fn(&str) -> Option<Bounds>,
    /// The dotted keys of the configuration named `field` (for an unknown key).
    elsewhere: &'a dyn Fn(&str) -> Vec<String>,
}

/// `T`'s JSON Schema as its files are read (draft 2020-12, for deserialising).
fn schema_of<T: schemars::JsonSchema>() -> serde_json::Value {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value()
}

/// Whether `dotted` is a key of `T`'s files (a leaf or a section).
pub fn has_key<T: schemars::JsonSchema>(dotted: &str) -> bool {
    let field = dotted.rsplit('.').next().unwrap_or(dotted);
    keys_named(&schema_of::<T>(), field)
        .iter()
        .any(|k| k == dotted)
}

/// The dotted paths of `schema`'s keys named `field`, at any depth up to a few (at most
/// three paths).
fn keys_named(schema: &serde_json::Value, field: &str) -> Vec<String> {
    fn visit(
        schema: &serde_json::Value,
        node: &serde_json::Value,
        at: &str,
        field: &str,
        depth: u32,
        out: &mut Vec<String>,
    ) {
        let Some(node) = resolved(schema, node) else {
            return;
        };
        if depth > 4 || out.len() >= 3 {
            return;
        }
        for alternatives in ["anyOf", "oneOf", "allOf"] {
            for alt in node
                .get(alternatives)
                .and_then(|a| a.as_array())
                .into_iter()
                .flatten()
            {
                visit(schema, alt, at, field, depth + 1, out);
            }
        }
        let Some(props) = node.get("properties").and_then(|p| p.as_object()) else {
            return;
        };
        for (name, child) in props {
            let path = if at.is_empty() {
                name.clone()
            } else {
                format!("{at}.{name}")
            };
            if name == field && !out.contains(&path) && out.len() < 3 {
                out.push(path.clone());
            }
            visit(schema, child, &path, field, depth + 1, out);
        }
    }
    let mut out = Vec::new();
    visit(schema, schema, "", field, 0, &mut out);
    out
}

/// The dotted path of the first array in `value` where `schema` wants a table: serde would
/// read the section from the array by position (`batches = [1, 2]` as its first two keys).
fn array_for_table(schema: &serde_json::Value, value: &toml::Value) -> Option<String> {
    fn visit(
        schema: &serde_json::Value,
        node: &serde_json::Value,
        value: &toml::Value,
        at: &str,
        depth: u32,
    ) -> Option<String> {
        let node = resolved(schema, node)?;
        match value {
            toml::Value::Array(_) if depth > 0 && wants_table(schema, node, 0) => {
                Some(at.to_owned())
            }
            // An array of tables (`[[plot]]`): each element.
            toml::Value::Array(items) if depth < 8 => {
                let each = node.get("items")?;
                items.iter().enumerate().find_map(|(i, item)| {
                    visit(schema, each, item, &format!("{at}[{i}]"), depth + 1)
                })
            }
            toml::Value::Table(t) if depth < 8 => t.iter().find_map(|(key, v)| {
                let child = property(schema, node, key, 0)?;
                let path = match at {
                    "" => key.clone(),
                    _ => format!("{at}.{key}"),
                };
                visit(schema, child, v, &path, depth + 1)
            }),
            _ => None,
        }
    }
    visit(schema, schema, value, "", 0)
}

/// Whether `value` holds an array at any depth below its top.
fn holds_array(value: &toml::Value) -> bool {
    match value {
        toml::Value::Table(t) => t.values().any(|v| v.is_array() || holds_array(v)),
        _ => false,
    }
}

/// The schema of `node`'s property `key`, looked up through references and alternatives.
fn property<'s>(
    schema: &'s serde_json::Value,
    node: &'s serde_json::Value,
    key: &str,
    depth: u32,
) -> Option<&'s serde_json::Value> {
    let node = resolved(schema, node)?;
    if let Some(child) = node.get("properties").and_then(|p| p.get(key)) {
        return Some(child);
    }
    if depth > 4 {
        return None;
    }
    alternatives(node).find_map(|alt| property(schema, alt, key, depth + 1))
}

/// Whether `node` takes a table (an object) and no array.
fn wants_table(schema: &serde_json::Value, node: &serde_json::Value, depth: u32) -> bool {
    fn types(schema: &serde_json::Value, node: &serde_json::Value, depth: u32) -> Vec<String> {
        let Some(node) = resolved(schema, node) else {
            return Vec::new();
        };
        let mut out: Vec<String> = match node.get("type") {
            Some(serde_json::Value::String(t)) => vec![t.clone()],
            Some(serde_json::Value::Array(ts)) => ts
                .iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
            _ if node.get("properties").is_some() => vec!["object".to_owned()],
            _ => Vec::new(),
        };
        if depth < 4 {
            out.extend(alternatives(node).flat_map(|alt| types(schema, alt, depth + 1)));
        }
        out
    }
    let all = types(schema, node, depth);
    all.iter().any(|t| t == "object") && !all.iter().any(|t| t == "array")
}

/// The alternatives of a schema node (`anyOf`, `oneOf`, `allOf`).
fn alternatives(node: &serde_json::Value) -> impl Iterator<Item = &serde_json::Value> {
    ["anyOf", "oneOf", "allOf"]
        .into_iter()
        .filter_map(|k| node.get(k).and_then(serde_json::Value::as_array))
        .flatten()
}

/// `node` of `schema`, or the definition its `$ref` names (itself perhaps a reference: a
/// few at most are followed).
fn resolved<'s>(
    schema: &'s serde_json::Value,
    mut node: &'s serde_json::Value,
) -> Option<&'s serde_json::Value> {
    for _ in 0..8 {
        let Some(target) = node.get("$ref").and_then(serde_json::Value::as_str) else {
            return Some(node);
        };
        node = schema.pointer(target.strip_prefix('#')?)?;
    }
    None
}

/// serde's reason with Rust's type names said as a file's reader knows them.
fn readable(reason: &str) -> String {
    // Only serde's own tail is rewritten: a user's value quoted earlier in the message may
    // hold the same words.
    if let Some((head, name)) = reason.rsplit_once(", expected struct ")
        && !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return format!("{head}, expected a table of keys");
    }
    let plain = [
        (", expected u64", ", expected a whole number, 0 or more"),
        (
            ", expected u32",
            ", expected a whole number from 0 to 4294967295",
        ),
        (
            ", expected a nonzero u32",
            ", expected a whole number from 1 to 4294967295",
        ),
        (", expected f64", ", expected a number"),
    ];
    match plain.iter().find(|(rust, _)| reason.ends_with(rust)) {
        Some((rust, said)) => format!("{}{said}", &reason[..reason.len() - rust.len()]),
        None => reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_the_plural_of_their_noun() {
        let cases = [
            (1, "batch", "1 batch"),
            (2, "batch", "2 batches"),
            (2, "query", "2 queries"),
            (2, "day", "2 days"),
            (0, "point", "0 points"),
            (3, "more violation", "3 more violations"),
            (2, "DPU", "2 DPUs"),
            (2, "box", "2 boxes"),
        ];
        for (n, noun, said) in cases {
            assert_eq!(counted(n as u64, noun), said);
        }
    }

    #[test]
    fn override_values_parse_as_toml_or_string() {
        let o = Override::parse("queries.skew=1.2").unwrap();
        assert_eq!(o.key, "queries.skew");
        assert_eq!(o.value, toml::Value::Float(1.2));
        let o = Override::parse("queries.kind=get").unwrap();
        assert_eq!(o.value, toml::Value::String("get".into()));
        let o = Override::parse("batches.warmup=3").unwrap();
        assert_eq!(o.value, toml::Value::Integer(3));
        assert!(Override::parse("noequals").is_err());
        let e = Override::parse("queries.batch_size=18446744073709551615").unwrap_err();
        assert!(e.to_string().contains("beyond TOML's integers"), "{e}");
        assert!(e.to_string().contains("`queries.batch_size`"), "{e}");
        let e = Override::parse("transfer.call_fixed_us=1e400").unwrap_err();
        assert!(
            e.to_string().contains("1e400 is beyond the largest number"),
            "{e}"
        );
        // Not numbers: still strings.
        let o = Override::parse("queries.kind=e400").unwrap();
        assert_eq!(o.value, toml::Value::String("e400".into()));
        // Other text that is no TOML value is still a string, a leading zero included.
        let o = Override::parse("queries.kind=range-max").unwrap();
        assert_eq!(o.value, toml::Value::String("range-max".into()));
        let o = Override::parse("seed=007").unwrap();
        assert_eq!(o.value, toml::Value::String("007".into()));
        assert!(Override::parse("seed=9223372036854775808").is_err());
        let o = Override::parse("x=-9223372036854775808").unwrap();
        assert_eq!(o.value, toml::Value::Integer(i64::MIN));
        assert!(Override::parse("a..b=1").is_err());
    }

    #[test]
    fn only_serdes_own_tail_is_reworded() {
        let cases = [
            (
                "invalid type: integer `1`, expected struct RawQueries",
                "invalid type: integer `1`, expected a table of keys",
            ),
            (
                "unknown variant `expected struct x`, expected `sync` or `async`",
                "unknown variant `expected struct x`, expected `sync` or `async`",
            ),
            (
                "invalid type: string \", expected struct X\", expected f64",
                "invalid type: string \", expected struct X\", expected a number",
            ),
            (
                "invalid value: integer `5000000000`, expected u32",
                "invalid value: integer `5000000000`, expected a whole number from 0 to 4294967295",
            ),
        ];
        for (serde, said) in cases {
            assert_eq!(readable(serde), said);
        }
    }

    #[test]
    fn numbers_are_shown_short() {
        let cases = [
            (1e300, "1e300"),
            (0.5, "0.5"),
            (1.0, "1"),
            (1e-9, "1e-9"),
            (0.0, "0"),
        ];
        for (x, text) in cases {
            assert_eq!(shown(x), text);
        }
        assert_eq!(shown(-2.5e20), "-2.5e20");
        assert_eq!(shown(123456.75), "123456.75");
    }

    #[test]
    fn negative_zeros_become_zeros_in_files_and_overrides() {
        let table: toml::Table = "a = -0.0\n[b]\nc = [-0.0, 1.5]\nd = -2.0".parse().unwrap();
        let overrides = [Override::parse("b.e=-0.0").unwrap()];
        let source = Source::new("f".into(), table, &overrides, None, &[]).unwrap();
        let t = &source.table;
        let b = t["b"].as_table().unwrap();
        for zero in [&t["a"], &b["c"][0], &b["e"]] {
            let x = zero.as_float().unwrap();
            assert!(x == 0.0 && x.is_sign_positive(), "{zero}");
        }
        assert_eq!(b["c"][1].as_float(), Some(1.5));
        assert_eq!(b["d"].as_float(), Some(-2.0));
    }

    #[test]
    fn setting_below_a_value_is_an_error() {
        let mut t: toml::Table = "a = 1".parse().unwrap();
        let err = set_path(&mut t, "a.b", toml::Value::Integer(2), "--set a.b=2").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("a"));
    }
}
