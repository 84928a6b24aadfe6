//! Text a skill wrote is data: the one rule for which characters such text may hold, and
//! the one way to show it to a human.
//!
//! A skill's name, version, descriptions, arguments and tool texts reach a terminal
//! (`skillhost show`, `approve`) and an MCP client's approval dialog. Control characters
//! there are instructions to the terminal, not text: an escape sequence can move the
//! cursor and erase the lines above it, a carriage return can overwrite a line, and a
//! bidirectional override can make code read differently from what it is. [`check`]
//! refuses them when a skill loads; [`visible`] and [`quote`] escape whatever still
//! reaches a human (tool output, a server's error text, file contents), so that what the
//! human reads is what the bytes hold.

use std::borrow::Cow;
use std::fmt;

/// What a field may hold besides printable text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextKind {
    /// One line: no line break and no tab (names, versions, arguments, hosts).
    Line,
    /// Prose (descriptions): line breaks (`\n`) and tabs are allowed.
    Prose,
}

/// A character a field may not hold, and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forbidden {
    /// The character.
    pub ch: char,
    /// Its byte offset in the field.
    pub byte: usize,
}

impl Forbidden {
    /// What kind of character it is, for a message.
    pub fn kind(&self) -> &'static str {
        if is_bidi_control(self.ch) { "a bidirectional text control" } else { "a control character" }
    }
}

impl fmt::Display for Forbidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (U+{:04X} at byte {})", self.kind(), self.ch as u32, self.byte)
    }
}

/// The Unicode characters that reorder text: the embeddings and overrides
/// (U+202A–U+202E), the isolates (U+2066–U+2069) and the marks (U+200E, U+200F, U+061C).
pub fn is_bidi_control(ch: char) -> bool {
    matches!(ch, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// Whether `ch` is refused in a field of `kind`: every C0 control (but `\n` and `\t` in
/// prose), DEL, every C1 control and the bidirectional controls ([`is_bidi_control`]);
/// in one line, also the Unicode line and paragraph separators (U+2028, U+2029).
pub fn is_forbidden(ch: char, kind: TextKind) -> bool {
    match ch {
        '\n' | '\t' | '\u{2028}' | '\u{2029}' => kind == TextKind::Line,
        _ => ch.is_control() || is_bidi_control(ch),
    }
}

/// The first character of `text` a field of `kind` may not hold.
pub fn check(text: &str, kind: TextKind) -> Result<(), Forbidden> {
    match text.char_indices().find(|&(_, ch)| is_forbidden(ch, kind)) {
        Some((byte, ch)) => Err(Forbidden { ch, byte }),
        None => Ok(()),
    }
}

/// `text` with every character [`check`] refuses in prose written out visibly: `\r`,
/// `\x1b` and the like for C0 controls, `\u202E` and the like for DEL, C1 controls and
/// bidirectional controls (so JSON stays JSON, and reads back as the same string). Line
/// breaks and tabs are kept. Borrowed when there is nothing to escape.
pub fn visible(text: &str) -> Cow<'_, str> {
    if check(text, TextKind::Prose).is_ok() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for ch in text.chars() {
        if is_forbidden(ch, TextKind::Prose) {
            push_escaped(&mut out, ch);
        } else {
            out.push(ch);
        }
    }
    Cow::Owned(out)
}

fn push_escaped(out: &mut String, ch: char) {
    use fmt::Write;
    let _ = match ch {
        '\r' => write!(out, "\\r"),
        '\0'..='\u{1f}' => write!(out, "\\x{:02x}", ch as u32),
        _ => write!(out, "\\u{:04X}", ch as u32),
    };
}

/// `text` as one quoted, capped field for a message a human decides on: as [`one_line`],
/// between double quotes (a quote or backslash inside written `\"`, `\\`).
pub fn quote(text: &str, cap: usize) -> String {
    collapse(text, cap, true)
}

/// `text` as one capped line for a message a human decides on: every run of whitespace
/// (line breaks included) becomes one space, forbidden characters are escaped as by
/// [`visible`], and past `cap` characters the rest is cut and counted, so no field can
/// push what follows it off the screen.
pub fn one_line(text: &str, cap: usize) -> String {
    collapse(text, cap, false)
}

fn collapse(text: &str, cap: usize, quoted: bool) -> String {
    let mut out = String::from(if quoted { "\"" } else { "" });
    let (mut shown, mut space) = (0usize, false);
    let mut chars = text.trim().chars();
    while let Some(ch) = chars.next() {
        if shown >= cap {
            let rest = 1 + chars.count();
            let end = if quoted { "\"" } else { "" };
            out.push_str(&format!("…{end} ({rest} more characters)"));
            return out;
        }
        if ch.is_whitespace() && !is_forbidden(ch, TextKind::Prose) {
            if !space {
                out.push(' ');
                shown += 1;
            }
            space = true;
            continue;
        }
        space = false;
        shown += 1;
        match ch {
            '"' if quoted => out.push_str("\\\""),
            '\\' if quoted => out.push_str("\\\\"),
            _ if is_forbidden(ch, TextKind::Prose) => push_escaped(&mut out, ch),
            _ => out.push(ch),
        }
    }
    if quoted {
        out.push('"');
    }
    out
}

/// What a secret's value is replaced with in text the host reports or records.
pub const REDACTED: &str = "[redacted secret]";

/// Values shorter than this are not replaced (they would turn ordinary words into noise).
const MIN_SECRET_LEN: usize = 4;

/// Replaces the values of the host's secrets wherever they appear in text the host
/// reports or records (the forge's reports, the commands in the audit log) with
/// [`REDACTED`]. It holds the values: it has no `Debug`.
#[derive(Clone, Default)]
pub struct SecretRedactor {
    values: Vec<String>,
}

impl SecretRedactor {
    /// A redactor of `values` (trimmed; those under 4 bytes are left alone).
    pub fn new(values: impl IntoIterator<Item = String>) -> Self {
        let mut values: Vec<String> = values.into_iter().map(|v| v.trim().to_owned()).filter(|v| v.len() >= MIN_SECRET_LEN).collect();
        // Longest first, so that a secret containing another is replaced whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Self { values }
    }

    /// Whether it replaces nothing.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Replace every value in `text`.
    pub fn text(&self, text: &mut String) {
        for value in &self.values {
            if text.contains(value.as_str()) {
                *text = text.replace(value.as_str(), REDACTED);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_refuses_controls_and_bidi_per_kind() {
        /// A refused character and its byte offset; `None` when the text is accepted.
        type Refused = Option<(char, usize)>;
        let table: &[(&str, TextKind, Refused)] = &[
            ("1.0.0", TextKind::Line, None),
            ("grüße 日本", TextKind::Line, None),
            ("1.0\u{1b}[2K", TextKind::Line, Some(('\u{1b}', 3))),
            ("1.0\u{1b}[2K", TextKind::Prose, Some(('\u{1b}', 3))),
            ("a\rb", TextKind::Prose, Some(('\r', 1))),
            ("a\nb", TextKind::Line, Some(('\n', 1))),
            ("a\nb\tc", TextKind::Prose, None),
            ("a\tb", TextKind::Line, Some(('\t', 1))),
            ("nul\0", TextKind::Prose, Some(('\0', 3))),
            ("del\u{7f}", TextKind::Prose, Some(('\u{7f}', 3))),
            ("c1\u{9b}", TextKind::Prose, Some(('\u{9b}', 2))),
            ("x\u{202E}y", TextKind::Prose, Some(('\u{202E}', 1))),
            ("\u{202A}", TextKind::Line, Some(('\u{202A}', 0))),
            ("\u{2066}", TextKind::Line, Some(('\u{2066}', 0))),
            ("\u{2069}", TextKind::Line, Some(('\u{2069}', 0))),
            ("\u{200E}", TextKind::Line, Some(('\u{200E}', 0))),
            ("\u{200F}", TextKind::Line, Some(('\u{200F}', 0))),
            ("\u{061C}", TextKind::Line, Some(('\u{061C}', 0))),
            ("\u{2065}\u{202F}", TextKind::Line, None),
            ("a\u{2028}b", TextKind::Line, Some(('\u{2028}', 1))),
            ("a\u{2029}b", TextKind::Prose, None),
        ];
        for &(text, kind, expected) in table {
            let got = check(text, kind).err().map(|f| (f.ch, f.byte));
            assert_eq!(got, expected, "{text:?} as {kind:?}");
        }
        let err = check("1.0\u{1b}[2K", TextKind::Line).unwrap_err();
        assert_eq!(err.to_string(), "a control character (U+001B at byte 3)");
        let err = check("x\u{202E}", TextKind::Line).unwrap_err();
        assert_eq!(err.to_string(), "a bidirectional text control (U+202E at byte 1)");
    }

    #[test]
    fn visible_writes_out_what_check_refuses() {
        let table = [
            ("plain\ttext\n", "plain\ttext\n"),
            ("\u{1b}[2Kok", "\\x1b[2Kok"),
            ("a\rb", "a\\rb"),
            ("x\u{202E}y", "x\\u202Ey"),
            ("\u{7f}\u{85}", "\\u007F\\u0085"),
        ];
        for (text, shown) in table {
            assert_eq!(visible(text), shown, "{text:?}");
            assert!(check(&visible(text), TextKind::Prose).is_ok());
        }
        // Inside a JSON string the escapes of non-C0 characters read back as the same text.
        let json = format!("\"{}\"", visible("x\u{202E}\u{85}y"));
        assert_eq!(serde_json::from_str::<String>(&json).unwrap(), "x\u{202E}\u{85}y");
    }

    #[test]
    fn quote_collapses_escapes_and_caps() {
        assert_eq!(quote("1.0.0", 64), "\"1.0.0\"");
        assert_eq!(quote(&format!("1.0{}asks for nothing", "\n".repeat(300)), 64), "\"1.0 asks for nothing\"");
        assert_eq!(quote("a \t\r\n b", 64), "\"a \\r b\"");
        assert_eq!(quote("say \"hi\"", 64), "\"say \\\"hi\\\"\"");
        assert_eq!(quote("\u{1b}[1A\u{202E}", 64), "\"\\x1b[1A\\u202E\"");
        assert_eq!(quote(&"x".repeat(100), 10), format!("\"{}…\" (90 more characters)", "x".repeat(10)));
        assert_eq!(one_line("run  \n\n `x`", 64), "run `x`");
        assert_eq!(one_line(&"y".repeat(12), 10), format!("{}… (2 more characters)", "y".repeat(10)));
    }
}
